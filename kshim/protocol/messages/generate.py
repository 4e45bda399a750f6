"""Writes the typed message modules of this package from kio's generated classes.

kio (PyPI) carries one dataclass per message and version, generated from
Kafka's JSON schemas. Handlers should not care which version a client sent,
so each API gets one request and one response type holding the union of the
fields of every version kshim serves, with plain Python types: this is how
Kafka's own generated ``*Data`` classes work (fields a version lacks keep
their default). Run it after changing the served versions or kio:

    python -m kshim.protocol.messages.generate

``tests/protocol/test_messages.py`` fails when the files on disk differ from
what this writes.
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.index import api_key_map

from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, HAND_ENCODED, served_range
from kshim.protocol.messages.shapes import Kind, scalar_kind

PACKAGE_DIR = Path(__file__).parent
PROJECT_SETTINGS = PACKAGE_DIR.parents[2] / "pyproject.toml"


@dataclass(slots=True)
class FieldSpec:
    name: str  # kio's, and time fields gain "_ms": they hold integer milliseconds
    annotation: str
    default: str | None  # Python source of the default, None when required


@dataclass(slots=True)
class ClassSpec:
    name: str
    fields: dict[str, FieldSpec] = field(default_factory=dict)


def _annotation(hint: Any, kafka_type: str | None) -> tuple[str, str | None, bool]:
    """(annotation, nested class name, nullable) of a kio field's type hint."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        annotation, nested, _ = _annotation(inner[0], kafka_type)
        return f"{annotation} | None", nested, True
    if origin is tuple:
        annotation, nested, _ = _annotation(typing.get_args(hint)[0], kafka_type)
        return f"list[{annotation}]", nested, False
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint.__name__, hint.__name__, False
    return scalar_kind(kafka_type).annotation, None, False


def _zero(annotation: str, nested: str | None, nullable: bool, kafka_type: str | None) -> str:
    """The default of a field whose schema gives none: Kafka's zero value for its type."""
    if nullable:
        return "None"
    if annotation.startswith("list["):
        return "field(default_factory=list)"
    if nested is not None:
        return f"field(default_factory={nested})"
    return scalar_kind(kafka_type).zero


def _default_source(value: Any, kind: Kind) -> str:
    if value is None:
        return "None"
    if isinstance(value, tuple):
        if value:
            raise ValueError(f"non-empty tuple default {value!r}")
        return "field(default_factory=list)"
    if isinstance(value, datetime.timedelta):
        return str(codec.milliseconds(value))
    if isinstance(value, bool | str):
        return repr(value)
    if kind.annotation == "ErrorCode":
        return f"ErrorCode.{value.name}"
    if isinstance(value, int):
        return str(int(value))
    raise ValueError(f"cannot render default {value!r}")


def _merge_class(
    specs: dict[str, ClassSpec], cls: type[Any], all_defaulted: bool, order: list[str]
) -> None:
    """Adds ``cls``'s fields (one version of a class) to the union in ``specs``."""
    spec = specs.setdefault(cls.__name__, ClassSpec(cls.__name__))
    if cls.__name__ not in order:
        order.append(cls.__name__)
    hints = typing.get_type_hints(cls)
    for kio_field in dataclasses.fields(cls):
        if kio_field.name.startswith("__"):
            continue
        hint = hints[kio_field.name]
        kafka_type = kio_field.metadata.get("kafka_type")
        annotation, nested, nullable = _annotation(hint, kafka_type)
        kind = scalar_kind(kafka_type)
        if kio_field.default is not dataclasses.MISSING:
            default: str | None = _default_source(kio_field.default, kind)
        elif kio_field.default_factory is not dataclasses.MISSING:
            default = _default_source(kio_field.default_factory(), kind)
        else:
            default = _zero(annotation, nested, nullable, kafka_type) if all_defaulted else None
        known = spec.fields.get(kio_field.name)
        if known is None:
            name = kio_field.name + kind.suffix
            spec.fields[kio_field.name] = FieldSpec(name, annotation, default)
        elif nullable and not known.annotation.endswith("| None"):
            known.annotation += " | None"  # nullable in an older served version
        for inner in _nested_classes(hint):
            _merge_class(specs, inner, all_defaulted, order)


def _nested_classes(hint: Any) -> list[type[Any]]:
    found = []
    for candidate in (hint, *typing.get_args(hint)):
        for inner in (candidate, *typing.get_args(candidate)):
            if dataclasses.is_dataclass(inner) and isinstance(inner, type):
                found.append(inner)
    return found


def _classes(api_key: int, request: bool) -> list[ClassSpec]:
    """The union, over every served version, of the request's or response's classes."""
    specs: dict[str, ClassSpec] = {}
    order: list[str] = []
    low, high = served_range(api_key)
    # Highest version first: field order and types follow the newest schema.
    for version in range(high, low - 1, -1):
        cls = (
            codec.request_class(api_key, version)
            if request
            else codec.response_class(api_key, version)
        )
        _merge_class(specs, cls, all_defaulted=request, order=order)
    return [specs[name] for name in reversed(order)]


def _render_class(spec: ClassSpec) -> str:
    lines = ["@dataclass(slots=True, kw_only=True)", f"class {spec.name}:"]
    for item in spec.fields.values():
        line = f"    {item.name}: {item.annotation}"
        if item.default is not None:
            line += f" = {item.default}"
        lines.append(line)
    return "\n".join(lines)


def render_module(api_key: int) -> str:
    """The source of one API's module."""
    name = api_key_map[api_key]
    low, high = served_range(api_key)
    parts = []
    kinds = [kind for kind in ("request", "response") if (api_key, kind) not in HAND_ENCODED]
    classes = {kind: _classes(api_key, kind == "request") for kind in kinds}
    title = name.replace("_", " ").title().replace(" ", "")
    parts.append(
        f'"""{title} (API key {api_key}), versions {low}-{high}, as handlers see it.\n\n'
        "Generated by kshim/protocol/messages/generate.py from kio's classes: every field of\n"
        "every served version, with Kafka's default where a version lacks it. Do not edit.\n"
        '"""'
    )
    body = "\n\n\n".join(_render_class(spec) for kind in kinds for spec in classes[kind])
    imports = ["from __future__ import annotations", ""]
    if "uuid." in body:
        imports += ["import uuid"]
    imports += ["from dataclasses import dataclass" + (", field" if "field(" in body else "")]
    if "ErrorCode" in body:
        imports += ["", "from kshim.protocol.errors import ErrorCode"]
    parts.append("\n".join(imports))
    parts.append(f"API_KEY = {api_key}")
    parts.append(body)
    return "\n\n".join(parts[:3]) + "\n\n\n" + parts[3] + "\n"


def module_name(api_key: int) -> str:
    return str(api_key_map[api_key])


def _generated_keys() -> list[int]:
    return [
        api_key
        for api_key in sorted(ADVERTISED)
        if not {(api_key, "request"), (api_key, "response")} <= HAND_ENCODED
    ]


def write_all(directory: Path = PACKAGE_DIR) -> list[Path]:
    """Writes every API's module into ``directory``, formatted by ruff with the project's
    settings (its pyproject.toml, wherever ``directory`` is); returns the paths."""
    paths = []
    for api_key in _generated_keys():
        path = directory / f"{module_name(api_key)}.py"
        path.write_text(render_module(api_key))
        paths.append(path)
    ruff = [sys.executable, "-m", "ruff"]
    settings = ["--config", str(PROJECT_SETTINGS)]
    subprocess.run([*ruff, "check", *settings, "--fix", "--quiet", *map(str, paths)], check=True)
    subprocess.run([*ruff, "format", *settings, "--quiet", *map(str, paths)], check=True)
    return paths


if __name__ == "__main__":
    for written in write_all():
        print(written)
