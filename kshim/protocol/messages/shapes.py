"""How each of kio's scalar field types appears in kshim's typed messages.

Integers of every width are ``int``, kio's nominal strings ``str``; time
fields become integer milliseconds (kio decodes them to ``timedelta`` and
``datetime``), and their names gain ``_ms`` as in Kafka's schemas.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kshim.protocol.codec import as_datetime, as_timedelta, milliseconds

Convert = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class Kind:
    annotation: str  # the Python type in the generated class
    zero: str  # Python source of Kafka's default for the type
    suffix: str = ""  # appended to kio's field name
    to_typed: Convert = _same  # kio's value -> the typed message's
    to_kio: Convert = _same  # the typed message's value -> kio's


_INTEGER = Kind("int", "0")
# Nullable time fields never reach these converters with None: convert.py passes None on.
_MILLISECONDS = Kind("int", "0", "_ms", milliseconds, as_timedelta)
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
    "datetime_i64": Kind("int", "-1", "_ms", milliseconds, as_datetime),
}


def scalar_kind(kafka_type: str | None) -> Kind:
    """The kind of a scalar kio field (kio's ``kafka_type`` metadata); integers by default."""
    return _KINDS.get(kafka_type or "", _INTEGER)
