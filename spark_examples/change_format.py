"""The wire format of one captured change: one Kafka record on the capture topic.

Key (UTF-8 JSON, compact, sorted keys) names the row: ``{"pk":{"id":1},"table":"orders"}``.
It is byte-for-byte deterministic, so every change to one row has the same key and the
compacted ``T.full`` view keeps exactly the latest change per row.

Value (UTF-8 JSON) is the row image with its global sequence number::

    {"seq": 17, "op": "insert", "table": "orders",
     "columns": {"id": "integer", "name": "text"}, "row": {"id": 1, "name": "x"}}

or null (a tombstone) for a delete. ``columns`` carries the portable types so that a
destination of any engine can create the table and decode the row without asking the
source. Value encoding: integer, real, text and boolean as JSON; numeric as a string (JSON
numbers would pass through binary floating point); blob as ``{"$base64": "..."}``; date and
timestamp as ISO-8601 strings; NULL as null.

A schema change is a record of its own, keyed by the table and ``seq``::

    key:   {"schema":"orders","seq":17}
    value: {"seq": 17, "op": "schema", "table": "orders",
            "columns": {"id": "integer", "name": "text", "stock": "integer"},
            "primary_key": ["id"], "not_null": ["stock"], "defaults": {"stock": 0}}

It holds the table's whole schema after the change, not the change: applying it brings
the destination table to that schema, which does nothing the second time. ``seq`` is the
last data change shipped before it: the schema holds from after that change on, and every
row record of the table after it carries its columns. The key never collides with a row's
(which always has ``pk``), and it differs per schema version so that ``T.full`` compaction
keeps every version in place among the rows (compaction keeps each survivor's offset): a
destination bootstrapped from ``T.full`` meets each row record after the schema it was
written under, and an added column reaches the older rows with its default, as the source
gave it to them. Two versions share a key only when no change of any table was shipped
between them; the later one then stands for both.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeAlias, TypedDict, cast

# Records are read with orjson (the apply sink reads every one: a third of the time json took,
# docs/design.md) and written with json, whose output the keys' bytes are defined by.
import orjson

from spark_examples import databases
from spark_examples.databases import Columns, PortableType, PortableValue, Row
from spark_examples.databases.schema import TableSchema

OPERATIONS = ("insert", "update")
SCHEMA_OPERATION = "schema"
_BASE64 = "$base64"

# One value as JSON: a blob is {"$base64": "..."}, numeric, date and timestamp are strings.
JsonValue: TypeAlias = bool | int | float | str | dict[str, str] | None
# Column name -> JSON value: a row image, or a primary key as the record key holds it.
JsonRow: TypeAlias = dict[str, JsonValue]


class KeyDocument(TypedDict):
    """The JSON of a record key."""

    pk: JsonRow
    table: str


class ValueDocument(TypedDict):
    """The JSON of a non-null record value."""

    seq: int
    op: str
    table: str
    columns: dict[str, PortableType]
    row: JsonRow


class SchemaKeyDocument(TypedDict):
    """The JSON of a schema-change record's key."""

    schema: str
    seq: int


class SchemaDocument(TypedDict):
    """The JSON of a schema-change record's value."""

    seq: int
    op: str
    table: str
    columns: dict[str, PortableType]
    primary_key: list[str]
    not_null: list[str]
    defaults: JsonRow


@dataclass(frozen=True)
class Change:
    """One decoded change value; ``row`` holds decoded python values. ``schema``, when set,
    is the schema the destination table must take before this row (a format whose records
    carry their schema, as Debezium's do, instead of schema-change records)."""

    seq: int
    op: str
    table: str
    columns: Columns
    row: Row
    schema: TableSchema | None = None


def _json_bytes(
    document: KeyDocument | ValueDocument | SchemaKeyDocument | SchemaDocument, sort_keys: bool
) -> bytes:
    # Values keep column order (a destination creates its table in that order).
    return json.dumps(
        document, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def encode_json_value(value: PortableValue | bytearray | memoryview) -> JsonValue:
    """One python value as its JSON form (see the module docstring)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {_BASE64: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} value {value!r}")


def decode_json_value(portable: PortableType, value: JsonValue) -> PortableValue:
    """The python value of one JSON value of portable type ``portable``."""
    return _reader(portable)(value)


def encode_key(table: str, pk: Mapping[str, PortableValue]) -> bytes:
    """The record key of the row of ``table`` with primary key values ``pk``."""
    pk_json = {name: encode_json_value(value) for name, value in pk.items()}
    return _json_bytes({"pk": pk_json, "table": table}, sort_keys=True)


def decode_key(key: bytes) -> tuple[str, JsonRow]:
    """(table, primary key as JSON values) from a record key; blobs stay {"$base64": ...}."""
    document: KeyDocument = orjson.loads(key)
    return document["table"], document["pk"]


def encode_value(
    seq: int, op: str, table: str, columns: Columns, row: Mapping[str, PortableValue]
) -> bytes:
    """The record value of an insert or update (a delete is a null value instead)."""
    if op not in OPERATIONS:
        raise ValueError(f"op must be one of {OPERATIONS}, not {op!r}")
    document: ValueDocument = {
        "seq": seq,
        "op": op,
        "table": table,
        "columns": dict(columns),
        "row": {name: encode_json_value(row.get(name)) for name in columns},
    }
    return _json_bytes(document, sort_keys=False)


def decode_row(columns: Columns, row_json: Mapping[str, JsonValue]) -> Row:
    """Decoded python values of a JSON row image, in ``columns`` order."""
    return {name: decode_json_value(kind, row_json.get(name)) for name, kind in columns.items()}


def decode_value(value: bytes) -> Change:
    """The change in a non-null record value; raises ValueError if it is malformed."""
    try:
        document: ValueDocument = orjson.loads(value)
        columns, readers = _columns_plan(document["columns"])
        row_json = document["row"]
        return Change(
            seq=int(document["seq"]),
            op=str(document["op"]),
            table=str(document["table"]),
            columns=columns,
            row={name: read(row_json.get(name)) for name, read in readers},
        )
    except (KeyError, TypeError, json.JSONDecodeError) as error:  # orjson's, bad UTF-8 too
        raise ValueError(f"malformed change value: {error}") from error


# How one column's JSON values are read (decode_json_value for a known type).
_Reader: TypeAlias = Callable[[JsonValue], PortableValue]
# A columns document checked: its columns, and each column's reader in column order.
_ColumnsPlan: TypeAlias = tuple[Columns, tuple[tuple[str, _Reader], ...]]
# The capture repeats a table's columns document in each of its records, so each distinct
# document is checked once: checking types and looking up decoders per column and record
# was a fifth of the apply sink's time. Bounded, for a source of very many tables.
_PLANS: dict[tuple[tuple[str, object], ...], _ColumnsPlan] = {}
_MAX_PLANS = 4096


def _columns_plan(document: Mapping[str, object]) -> _ColumnsPlan:
    """The checked columns of a value's ``columns`` document and their readers. The
    columns returned are shared between the changes that name them: never changed."""
    document = document if type(document) is dict else dict(document)
    signature = tuple(document.items())
    try:
        plan = _PLANS.get(signature)
    except TypeError:  # a type that is not a string: malformed, _portable_columns says so
        return _checked_plan(document)
    if plan is None:
        plan = _checked_plan(document)
        if len(_PLANS) < _MAX_PLANS:
            _PLANS[signature] = plan
    return plan


def _checked_plan(document: Mapping[str, object]) -> _ColumnsPlan:
    columns = _portable_columns(document)
    return columns, tuple((name, _reader(kind)) for name, kind in columns.items())


# The python type a JSON value of these portable types already has once parsed, which
# their decoders return as it is.
_PARSED_AS: dict[PortableType, type] = {"integer": int, "real": float, "text": str, "boolean": bool}


@functools.cache
def _reader(portable: PortableType) -> _Reader:
    """How values of ``portable`` are read (decode_json_value), its decoder looked up once."""
    decode = databases.value_decoder(portable)
    parsed_as = _PARSED_AS.get(portable)

    def read(value: JsonValue) -> PortableValue:
        if type(value) is parsed_as:  # most values: nothing to do
            return cast(PortableValue, value)
        if value is None:
            return None
        if type(value) is dict:
            return base64.b64decode(value[_BASE64])
        return decode(value)

    return read


def _portable_columns(columns: Mapping[str, object]) -> Columns:
    unknown = {name: kind for name, kind in columns.items() if not databases.is_portable_type(kind)}
    if unknown:
        raise ValueError(f"malformed change value: unknown portable types {unknown}")
    return {name: kind for name, kind in columns.items() if databases.is_portable_type(kind)}


# -- schema changes -----------------------------------------------------------------------
def encode_schema_key(table: str, seq: int) -> bytes:
    """The record key of ``table``'s schema shipped after sequence ``seq`` (see above)."""
    return _json_bytes({"schema": table, "seq": seq}, sort_keys=True)


def schema_key_table(key: bytes) -> str | None:
    """The table a schema-change key names, or None for any other key."""
    return _schema_table(orjson.loads(key))


def _schema_table(document: object) -> str | None:
    table = document.get("schema") if isinstance(document, dict) else None
    return table if isinstance(table, str) else None


def decode_any_key(key: bytes) -> tuple[str, JsonRow | None]:
    """(table, primary key) of a row's key, (table, None) of a schema-change key: the key
    parsed once, where ``schema_key_table`` then ``decode_key`` parse it twice (the apply
    sink reads every record's key). Raises KeyError or ValueError for any other key."""
    document = orjson.loads(key)
    schema_table = _schema_table(document)
    if schema_table is not None:
        return schema_table, None
    return document["table"], document["pk"]


def encode_schema_value(seq: int, schema: TableSchema) -> bytes:
    """The record value of ``schema``, shipped after the change of sequence ``seq``."""
    document: SchemaDocument = {
        "seq": seq,
        "op": SCHEMA_OPERATION,
        "table": schema.table,
        "columns": dict(schema.columns),
        "primary_key": list(schema.primary_key),
        "not_null": list(schema.not_null),
        "defaults": {name: encode_json_value(value) for name, value in schema.defaults.items()},
    }
    return _json_bytes(document, sort_keys=False)


def decode_schema_value(value: bytes) -> tuple[int, TableSchema]:
    """(seq, schema) of a schema-change value; raises ValueError if it is malformed."""
    try:
        document: SchemaDocument = orjson.loads(value)
        columns = _portable_columns(dict(document["columns"]))
        defaults = {
            name: decode_json_value(columns[name], value)
            for name, value in document["defaults"].items()
        }
        schema = TableSchema(
            table=str(document["table"]),
            columns=columns,
            primary_key=tuple(document["primary_key"]),
            not_null=tuple(document["not_null"]),
            defaults=defaults,
        )
        return int(document["seq"]), schema
    except (KeyError, TypeError, json.JSONDecodeError) as error:  # orjson's, bad UTF-8 too
        raise ValueError(f"malformed schema-change value: {error}") from error
