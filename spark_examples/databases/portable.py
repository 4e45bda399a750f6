"""Portable column types: the one vocabulary for columns and values across engines.

Values cross the ``databases`` interface as *decoded python values* of a portable type,
whatever the engine stores: integer -> int, real -> float, numeric -> Decimal, text -> str,
blob -> bytes, boolean -> bool, date -> datetime.date, timestamp -> naive datetime.datetime.
``PORTABLE_TO_ENGINE`` is the one table mapping portable types to each engine's column
types; ``portable_type`` maps an engine's declared type back.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable
from decimal import Decimal
from typing import (
    Literal,
    SupportsFloat,
    SupportsIndex,
    SupportsInt,
    TypeAlias,
    TypeGuard,
    get_args,
)

PortableType: TypeAlias = Literal[
    "integer", "real", "numeric", "text", "blob", "boolean", "date", "timestamp"
]
PORTABLE_TYPES: tuple[PortableType, ...] = get_args(PortableType)

EngineName: TypeAlias = Literal["sqlite", "postgresql", "duckdb"]

# A decoded value of one of the portable types (datetime.datetime is a datetime.date).
PortableValue: TypeAlias = int | float | Decimal | str | bytes | bool | datetime.date | None
# Column name -> value, and column name -> portable type, in column order.
Row: TypeAlias = dict[str, PortableValue]
Columns: TypeAlias = dict[str, PortableType]

# Column type used by create_table, per portable type and engine. SQLite keeps dates and
# timestamps as ISO-8601 text and booleans as 0/1; its NUMERIC affinity stores exact
# integers and reals, which is as exact as SQLite gets.
PORTABLE_TO_ENGINE: dict[PortableType, dict[EngineName, str]] = {
    "integer": {"sqlite": "INTEGER", "postgresql": "BIGINT", "duckdb": "BIGINT"},
    "real": {"sqlite": "REAL", "postgresql": "DOUBLE PRECISION", "duckdb": "DOUBLE"},
    "numeric": {"sqlite": "NUMERIC", "postgresql": "NUMERIC", "duckdb": "DECIMAL(38,10)"},
    "text": {"sqlite": "TEXT", "postgresql": "TEXT", "duckdb": "VARCHAR"},
    "blob": {"sqlite": "BLOB", "postgresql": "BYTEA", "duckdb": "BLOB"},
    "boolean": {"sqlite": "BOOLEAN", "postgresql": "BOOLEAN", "duckdb": "BOOLEAN"},
    "date": {"sqlite": "DATE", "postgresql": "DATE", "duckdb": "DATE"},
    "timestamp": {"sqlite": "TIMESTAMP", "postgresql": "TIMESTAMP", "duckdb": "TIMESTAMP"},
}


def _declared(kind: PortableType, *names: str) -> dict[str, PortableType]:
    return dict.fromkeys(names, kind)


# Declared type (upper case, without "(p,s)") -> portable type, for the engines' own names.
_DECLARED_TO_PORTABLE: dict[str, PortableType] = {
    **_declared("integer", "INTEGER", "INT", "BIGINT", "SMALLINT", "TINYINT"),
    **_declared("integer", "INT2", "INT4", "INT8", "HUGEINT", "UBIGINT", "UINTEGER"),
    **_declared("real", "REAL", "DOUBLE", "DOUBLE PRECISION", "FLOAT", "FLOAT4", "FLOAT8"),
    **_declared("numeric", "NUMERIC", "DECIMAL"),
    **_declared("text", "TEXT", "VARCHAR", "CHARACTER VARYING", "CHARACTER", "CHAR"),
    **_declared("blob", "BLOB", "BYTEA"),
    **_declared("boolean", "BOOLEAN", "BOOL"),
    **_declared("date", "DATE"),
    **_declared("timestamp", "TIMESTAMP", "DATETIME", "TIMESTAMP WITHOUT TIME ZONE"),
}


def is_portable_type(name: object) -> TypeGuard[PortableType]:
    """Whether ``name`` is one of ``PORTABLE_TYPES``."""
    return name in PORTABLE_TYPES


def portable_type(declared: str, engine: EngineName) -> PortableType:
    """The portable type of an engine's declared column type; raises ValueError if none."""
    name = declared.upper().split("(")[0].strip()
    if name in _DECLARED_TO_PORTABLE:
        return _DECLARED_TO_PORTABLE[name]
    if engine == "sqlite":
        return _sqlite_affinity(name)
    raise ValueError(f"unsupported {engine} column type {declared!r}")


def _sqlite_affinity(name: str) -> PortableType:
    # SQLite's own affinity rules (https://sqlite.org/datatype3.html, section 3.1).
    if "INT" in name:
        return "integer"
    if any(part in name for part in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if name == "" or "BLOB" in name:
        return "blob"
    if any(part in name for part in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "numeric"


def sql_literal(engine: EngineName, kind: PortableType, value: PortableValue) -> str:
    """``value`` as an SQL literal of portable type ``kind`` for ``engine`` (DDL takes
    no parameters). Raises ValueError for a blob default, which has no common literal."""
    value = decode_value(kind, value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        raise ValueError("blob defaults are not supported")
    if isinstance(value, datetime.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, datetime.date):
        text = value.isoformat()
    else:  # text, numeric
        text = str(value)
    literal = "'" + text.replace("'", "''") + "'"
    # SQLite keeps dates as text and takes no CAST in a column's DEFAULT.
    if engine == "sqlite" or kind in ("text", "numeric"):
        return literal
    return f"CAST({literal} AS {PORTABLE_TO_ENGINE[kind][engine]})"


def decode_value(portable: PortableType, value: object) -> PortableValue:
    """Turns what an engine returned (or a loosely typed value) into the portable python type.

    Raises TypeError or ValueError when ``value`` cannot be read as ``portable``.
    """
    if value is None:
        return None
    return _DECODERS[portable](value)


def value_decoder(portable: PortableType) -> Callable[[object], PortableValue]:
    """``decode_value`` of one portable type for values that are not None, looked up once
    by a caller decoding many values of that type."""
    return _DECODERS[portable]


def _to_integer(value: object) -> int:
    # The exact type first: isinstance against the Supports* protocols walks their members,
    # about 30 us a value, which the apply sink pays for every integer it decodes.
    if type(value) is int:
        return value
    if isinstance(value, str | bytes | bytearray | SupportsInt | SupportsIndex):
        return int(value)
    raise TypeError(f"cannot read {value!r} as an integer")


def _to_real(value: object) -> float:
    if type(value) is float:  # as in _to_integer: skip the protocol checks
        return value
    if isinstance(value, str | bytes | bytearray | SupportsFloat | SupportsIndex):
        return float(value)
    raise TypeError(f"cannot read {value!r} as a real")


def _to_decimal(value: object) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _to_text(value: object) -> str:
    return str(value)


def _to_boolean(value: object) -> bool:
    if isinstance(value, str):
        return value.lower() in ("1", "true", "t")
    return bool(value)


def _to_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return base64.b64decode(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"cannot read {value!r} as a blob")


def _to_date(value: object) -> datetime.date:
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    return datetime.date.fromisoformat(str(value)[:10])


def _to_timestamp(value: object) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, datetime.date):
        moment = datetime.datetime(value.year, value.month, value.day)
    else:
        moment = datetime.datetime.fromisoformat(str(value))
    if moment.tzinfo is not None:  # portable timestamps are naive UTC
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return moment


_DECODERS: dict[PortableType, Callable[[object], PortableValue]] = {
    "integer": _to_integer,
    "real": _to_real,
    "numeric": _to_decimal,
    "text": _to_text,
    "blob": _to_bytes,
    "boolean": _to_boolean,
    "date": _to_date,
    "timestamp": _to_timestamp,
}
