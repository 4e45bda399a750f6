"""How each of kio's scalar field types appears in kshim's typed messages.

Integers of every width are ``int``, kio's nominal strings ``str``; time
fields become integer milliseconds (kio decodes them to ``timedelta`` and
``datetime``), and their names gain ``_ms`` as in Kafka's schemas.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kshim.protocol.codec import EPOCH

Convert = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def _timedelta_to_ms(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


def _ms_to_timedelta(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def _datetime_to_ms(value: datetime.datetime | None) -> int | None:
    return None if value is None else int((value - EPOCH) / datetime.timedelta(milliseconds=1))


def _ms_to_datetime(value: int | None) -> datetime.datetime | None:
    return None if value is None else EPOCH + datetime.timedelta(milliseconds=value)


@dataclass(frozen=True, slots=True)
class Kind:
    annotation: str  # the Python type in the generated class
    zero: str  # Python source of Kafka's default for the type
    suffix: str = ""  # appended to kio's field name
    to_typed: Convert = _same  # kio's value -> the typed message's
    to_kio: Convert = _same  # the typed message's value -> kio's


_INTEGER = Kind("int", "0")
_MILLISECONDS = Kind("int", "0", "_ms", _timedelta_to_ms, _ms_to_timedelta)
_KINDS: dict[str, Kind] = {
    "string": Kind("str", '""'),
    "bool": Kind("bool", "False"),
    "bytes": Kind("bytes", 'b""'),
    "records": Kind("bytes", 'b""'),
    "uuid": Kind("uuid.UUID", "uuid.UUID(int=0)"),
    "error_code": Kind("ErrorCode", "ErrorCode.none"),
    "float64": Kind("float", "0.0"),
    "timedelta_i32": _MILLISECONDS,
    "timedelta_i64": _MILLISECONDS,
    "datetime_i64": Kind("int", "-1", "_ms", _datetime_to_ms, _ms_to_datetime),
}


def scalar_kind(kafka_type: str | None) -> Kind:
    """The kind of a scalar kio field (kio's ``kafka_type`` metadata); integers by default."""
    return _KINDS.get(kafka_type or "", _INTEGER)
