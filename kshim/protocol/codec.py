"""Message bodies through kio's generated codecs, one dataclass per message and version.

kio (PyPI) carries a dataclass per message and version, generated from Kafka's
own JSON schemas, with a native decoder. The broker decodes and encodes through
here and meets typed messages only (``messages/``, which converts). Tools and
tests describe a message as a nested dict instead: ``build`` makes one version's
dataclass from it, and ``encode_response`` encodes a dict holding the union of
every version's fields in one version, dropping what the version lacks.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import schema_name_map
from kio.serial import entity_reader, entity_writer

from kshim.protocol.bounds import check_body
from kshim.protocol.primitives import DecodeError

Converter = Callable[[Any], Any]
# (field name, value converter, filler for a missing field or None when it has a default)
Plan = tuple[tuple[str, Converter, Callable[[], Any] | None], ...]
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@cache
def request_class(api_key: int, version: int) -> type[Any]:
    """Returns kio's request dataclass; raises KeyError for an unknown pair."""
    try:
        return load_request_schema(api_key, version)
    except Exception as error:  # kio raises its own index errors
        raise KeyError((api_key, version)) from error


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    """Returns kio's response dataclass; raises KeyError for an unknown pair."""
    try:
        return load_response_schema(api_key, version)
    except Exception as error:
        raise KeyError((api_key, version)) from error


def is_flexible(api_key: int, version: int) -> bool:
    """True when this request version uses compact types and header v2."""
    return bool(request_class(api_key, version).__flexible__)


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(cls: type[Any]) -> Any:
    if cls not in _READERS:
        _READERS[cls] = entity_reader(cls)
    return _READERS[cls]


def _writer(cls: type[Any]) -> Any:
    if cls not in _WRITERS:
        _WRITERS[cls] = entity_writer(cls)
    return _WRITERS[cls]


def decode_request(api_key: int, version: int, frame: bytes | bytearray, offset: int) -> Any:
    """Decodes a request body starting at ``offset``.

    Raises DecodeError when the bytes do not match the schema (truncated or
    invalid values, a count the frame cannot hold, null where the schema
    forbids it): a broken frame.
    """
    cls = request_class(api_key, version)
    # kio's native reader reserves memory for a count before checking it against the
    # bytes left (a crafted count aborts the process) and returns None for a null in a
    # non-nullable field, so the body is walked first; see bounds.py.
    try:
        check_body(cls, frame, offset)
    except DecodeError as error:
        raise DecodeError(f"cannot decode api {api_key} v{version}: {error}") from error
    # kio's native reader takes read-only buffers only; a frame read in place arrives as a
    # bytearray (framing.py), so it is viewed read-only rather than copied.
    try:
        entity, _ = _reader(cls)(memoryview(frame).toreadonly()[offset:], 0)
    except Exception as error:
        raise DecodeError(f"cannot decode api {api_key} v{version}: {error}") from error
    # Trailing bytes are ignored, as Kafka does: librdkafka's Metadata request for all
    # topics carries three stray bytes (confluentinc/librdkafka#5049).
    return entity


def encode_response(api_key: int, version: int, body: Mapping[str, Any]) -> bytes:
    """Encodes a response body described as a nested dict of every version's fields (see
    module doc): those the version lacks are dropped, those it has but the dict lacks
    zero-filled."""
    cls = response_class(api_key, version)
    return encode_entity(cls, _build(cls, body, any_version=True))


def encode_entity(cls: type[Any], entity: Any) -> bytes:
    """Serialises a kio dataclass instance."""
    buffer = io.BytesIO()
    _writer(cls)(buffer, entity)
    return buffer.getvalue()


def build(cls: type[Any], body: Mapping[str, Any], *, any_version: bool = False) -> Any:
    """Builds the kio dataclass ``cls`` (and its nested ones) from a nested dict.

    Raises ValueError for a key ``cls`` does not have, or for a required field the dict
    lacks: a misspelt field name must fail, not encode a default. With ``any_version``
    (one dict describing a message for every version, as tests and tools write them),
    fields of other versions of the message are dropped and missing ones zero-filled;
    a name no version has still raises.
    """
    return _build(cls, body, any_version)


def _build(cls: type[Any], body: Mapping[str, Any], any_version: bool) -> Any:
    values = {}
    plan = _plan(cls, any_version)
    matched = 0
    for name, convert, fill in plan:
        if name in body:
            values[name] = convert(body[name])
            matched += 1
        elif fill is not None:
            values[name] = fill()
    if matched < len(body):
        unknown = set(body) - {name for name, _, _ in plan}
        if any_version:
            unknown -= _names_in_any_version(cls.__module__, cls.__name__)
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    return cls(**values)


@cache
def _names_in_any_version(module: str, class_name: str) -> frozenset[str]:
    """The field names of an entity (kio's class ``class_name`` in ``module``) in every
    version kio knows of its message."""
    parts = module.split(".")  # kio.schema.<message>.v<version>.<request|response|...>
    if len(parts) != 5 or not parts[3].startswith("v"):
        return frozenset()
    names: set[str] = set()
    for version in schema_name_map.get(parts[2], {}):
        other = importlib.import_module(".".join([*parts[:3], f"v{version}", parts[4]]))
        entity = getattr(other, class_name, None)
        if entity is not None:
            names.update(field.name for field in dataclasses.fields(entity))
    return frozenset(names)


# By (class, any_version): a plan for any version zero-fills what the dict leaves out.
_PLANS: dict[tuple[type[Any], bool], Plan] = {}


def _plan(cls: type[Any], any_version: bool) -> Plan:
    plan = _PLANS.get((cls, any_version))
    if plan is None:
        plan = _PLANS[(cls, any_version)] = _make_plan(cls, any_version)
    return plan


def _make_plan(cls: type[Any], any_version: bool) -> Plan:
    hints = typing.get_type_hints(cls)
    plan = []
    for field in dataclasses.fields(cls):
        if field.name.startswith("__"):
            continue
        convert = _converter(hints[field.name], field.metadata.get("kafka_type"), any_version)
        has_default = (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        )
        if has_default:
            fill = None
        elif any_version:
            fill = _filler(hints[field.name], convert)
        else:
            fill = _missing(cls, field.name)
        plan.append((field.name, convert, fill))
    return tuple(plan)


def _missing(cls: type[Any], name: str) -> Callable[[], Any]:
    def refuse() -> Any:
        raise ValueError(f"{cls.__name__} needs field {name}")

    return refuse


def _filler(hint: Any, convert: Converter) -> Callable[[], Any]:
    """A value for a required field the handler left out: empty, null or zero."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        return tuple
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        return lambda: None
    if dataclasses.is_dataclass(hint):
        return lambda: convert({})
    if hint is str or (isinstance(hint, type) and issubclass(hint, str)):
        return lambda: ""
    if hint is bool:
        return lambda: False
    if isinstance(hint, type) and issubclass(hint, bytes):
        return lambda: b""
    return lambda: convert(0)


def _converter(hint: Any, kafka_type: str | None, any_version: bool) -> Converter:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        convert_inner = _converter(inner[0], kafka_type, any_version)
        return lambda value: None if value is None else convert_inner(value)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        convert_item = _converter(item, kafka_type, any_version)
        return lambda values: tuple(convert_item(value) for value in values)
    if dataclasses.is_dataclass(hint):
        nested: type[Any] = hint  # type: ignore[assignment]
        return lambda value: (
            value if isinstance(value, nested) else _build(nested, value, any_version)
        )
    return _SCALAR_CONVERTERS.get(kafka_type or "", _identity)


def _identity(value: Any) -> Any:
    return value


def as_timedelta(value: Any) -> Any:
    """A kio time span from integer milliseconds (a timedelta passes unchanged)."""
    return (
        value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
    )


def as_datetime(value: Any) -> Any:
    """A kio timestamp from epoch milliseconds (None and a datetime pass unchanged)."""
    if value is None or isinstance(value, datetime.datetime):
        return value
    return EPOCH + datetime.timedelta(milliseconds=value)


def _uuid(value: Any) -> Any:
    return value if value is None or isinstance(value, uuid.UUID) else uuid.UUID(bytes=value)


_SCALAR_CONVERTERS: dict[str, Converter] = {
    "error_code": ErrorCode,
    "timedelta_i32": as_timedelta,
    "timedelta_i64": as_timedelta,
    "datetime_i64": as_datetime,
    "uuid": _uuid,
}


def milliseconds(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """Returns a decoded kio time field as integer milliseconds (-1 for None)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, datetime.datetime):
        return int((value - EPOCH) / datetime.timedelta(milliseconds=1))
    return int(value)
