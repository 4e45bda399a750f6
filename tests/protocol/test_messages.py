"""The typed messages: generated files match their generator, and every served version of
every API converts to them and back without losing a field."""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, HAND_ENCODED, served_versions
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages import convert, generate

GENERATED = sorted(path.name for path in generate.PACKAGE_DIR.glob("*.py")
                   if path.name not in {"__init__.py", "convert.py", "generate.py", "serial.py",
                                        "shapes.py"})  # fmt: skip


def test_generated_modules_match_the_generator(tmp_path: Path) -> None:
    """Regenerating from kio and the served versions changes nothing: edit the generator or
    apis.py, then run ``python -m kshim.protocol.messages.generate``."""
    written = generate.write_all(tmp_path)
    assert sorted(path.name for path in written) == GENERATED
    for path in written:
        assert path.read_text() == (generate.PACKAGE_DIR / path.name).read_text(), path.name


def _typed_class(api_key: int, kind: str) -> type[object]:
    module = importlib.import_module(f"kshim.protocol.messages.{generate.module_name(api_key)}")
    version = max(version for key, version in served_versions() if key == api_key)
    kio_class = (codec.request_class if kind == "request" else codec.response_class)(
        api_key, version
    )
    typed: type[object] = getattr(module, kio_class.__name__)
    return typed


def _typed(kind: str) -> list[tuple[int, int]]:
    """The served versions whose ``kind`` goes through kio and the typed messages (not
    Produce's and Fetch's hand-written codecs)."""
    return [(key, version) for key, version in served_versions() if (key, kind) not in HAND_ENCODED]


@pytest.mark.parametrize(("api_key", "version"), _typed("request"))
def test_every_served_request_version_converts_to_the_typed_request(
    api_key: int, version: int
) -> None:
    kio_class = codec.request_class(api_key, version)
    entity = codec.build(kio_class, {}, any_version=True)
    typed = convert.to_typed(_typed_class(api_key, "request"), entity)
    assert convert.to_kio(kio_class, typed) == entity


@pytest.mark.parametrize(("api_key", "version"), _typed("response"))
def test_every_served_response_version_takes_the_typed_response(api_key: int, version: int) -> None:
    """A typed response (every required field set) becomes each served version's entity,
    which kio encodes and decodes back to the same entity."""
    kio_class = codec.response_class(api_key, version)
    entity = convert.to_kio(kio_class, _filled(_typed_class(api_key, "response")))
    encoded = codec.encode_entity(kio_class, entity)
    assert entity_reader(kio_class)(memoryview(encoded), 0) == (entity, len(encoded))


def _filled(typed_class: type[Any]) -> Any:
    """An instance with one nested element in every array and a value in every field."""
    hints = typing.get_type_hints(typed_class)
    return typed_class(
        **{field.name: _sample(hints[field.name]) for field in dataclasses.fields(typed_class)}
    )


def _sample(hint: Any) -> Any:
    arguments = [argument for argument in typing.get_args(hint) if argument is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return _sample(arguments[0])
    if typing.get_origin(hint) is list:
        return [_sample(arguments[0])]
    if dataclasses.is_dataclass(hint):
        return _filled(hint)  # type: ignore[arg-type]
    samples: dict[Any, Any] = {int: 7, str: "s", bool: True, bytes: b"b", ErrorCode: ErrorCode.none,
                               uuid.UUID: uuid.UUID(int=5)}  # fmt: skip
    return samples[hint]


def test_a_field_a_version_lacks_keeps_kafkas_default() -> None:
    """JoinGroup v0 has no rebalance_timeout_ms; Kafka's default is -1 (not zero)."""
    from kshim.protocol.messages.join_group import JoinGroupRequest

    entity = codec.build(codec.request_class(11, 0), {"group_id": "g"}, any_version=True)
    assert convert.to_typed(JoinGroupRequest, entity).rebalance_timeout_ms == -1


def test_time_fields_are_milliseconds() -> None:
    from kshim.protocol.messages.join_group import JoinGroupRequest

    entity = codec.build(
        codec.request_class(11, 5),
        {"session_timeout": 45_000, "rebalance_timeout": 300_000},
        any_version=True,
    )
    typed = convert.to_typed(JoinGroupRequest, entity)
    assert (typed.session_timeout_ms, typed.rebalance_timeout_ms) == (45_000, 300_000)


def test_every_api_has_its_module() -> None:
    expected = {
        f"{generate.module_name(api_key)}.py"
        for api_key in ADVERTISED
        if not {(api_key, "request"), (api_key, "response")} <= HAND_ENCODED
    }
    assert set(GENERATED) == expected
