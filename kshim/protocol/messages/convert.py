"""Between kio's per-version dataclasses and kshim's typed messages.

A decoded request of any version becomes the API's typed request (fields the
version lacks keep their defaults); a typed response becomes the dataclass of
the version the client asked for (fields the version lacks are left out).
Each pair of classes gets a plan, made once, of which field goes where and
how its value is converted (``shapes.py``).
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from kshim.protocol.messages.shapes import scalar_kind

T = TypeVar("T")
Convert = Callable[[Any], Any]
# (typed message field, kio field, value converter) for every field the two classes share
Plan = tuple[tuple[str, str, Convert], ...]


def to_typed(typed_class: type[T], entity: Any) -> T:
    """The typed message holding a kio entity's fields."""
    plan = _plan(type(entity), typed_class, True)
    return typed_class(
        **{name: convert(getattr(entity, kio_name)) for name, kio_name, convert in plan}
    )


def to_kio(kio_class: type[Any], message: Any) -> Any:
    """The kio entity of ``kio_class`` (one version) holding a typed message's fields.

    Raises ValueError when the typed message lacks a field the version has: the typed
    classes hold every served version's fields, so that is a mismatch of the two.
    """
    plan = _plan(kio_class, type(message), False)
    return kio_class(
        **{kio_name: convert(getattr(message, name)) for name, kio_name, convert in plan}
    )


_PLANS: dict[tuple[type[Any], type[Any], bool], Plan] = {}


def _plan(kio_class: type[Any], typed_class: type[Any], into_typed: bool) -> Plan:
    key = (kio_class, typed_class, into_typed)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _make_plan(kio_class, typed_class, into_typed)
    return plan


def _make_plan(kio_class: type[Any], typed_class: type[Any], into_typed: bool) -> Plan:
    typed_fields = {item.name for item in dataclasses.fields(typed_class)}
    plan = []
    for kio_field, hint, suffix in _kio_fields(kio_class):
        name = kio_field.name + suffix
        if name not in typed_fields:
            raise ValueError(f"{typed_class.__name__} has no field {name} of {kio_class.__name__}")
        kafka_type = kio_field.metadata.get("kafka_type")
        plan.append((name, kio_field.name, _converter(hint, kafka_type, typed_class, into_typed)))
    return tuple(plan)


def _kio_fields(kio_class: type[Any]) -> list[tuple[dataclasses.Field[Any], Any, str]]:
    hints = typing.get_type_hints(kio_class)
    return [
        (item, hints[item.name], scalar_kind(item.metadata.get("kafka_type")).suffix)
        for item in dataclasses.fields(kio_class)
        if not item.name.startswith("__")
    ]


def _converter(
    hint: Any, kafka_type: str | None, typed_class: type[Any], into_typed: bool
) -> Convert:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        convert_inner = _converter(inner[0], kafka_type, typed_class, into_typed)
        return lambda value: None if value is None else convert_inner(value)
    if origin is tuple:
        convert_item = _converter(typing.get_args(hint)[0], kafka_type, typed_class, into_typed)
        if into_typed:
            return lambda values: [convert_item(value) for value in values]
        return lambda values: tuple(convert_item(value) for value in values)
    if dataclasses.is_dataclass(hint):
        kio_nested: type[Any] = hint  # type: ignore[assignment]
        # The typed class of a nested kio class has its name and lives beside the outer one.
        typed_nested = getattr(sys.modules[typed_class.__module__], kio_nested.__name__)
        if into_typed:
            return lambda value: to_typed(typed_nested, value)
        return lambda value: to_kio(kio_nested, value)
    kind = scalar_kind(kafka_type)
    return kind.to_typed if into_typed else kind.to_kio
