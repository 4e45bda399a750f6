"""Debezium's change events, as Kafka Connect's JsonConverter writes them, read as changes.

The apply job's second input format (``--format debezium``). One topic per source table,
``<topic prefix>.<schema>.<table>`` (or its full-data view ``<...>.full``); the destination
table is the topic name's last part. Each record:

- key: the row's primary key, ``{"id": 1}``;
- value: the envelope ``{"before": ..., "after": ..., "source": {...}, "op": ...}`` with
  ``op`` ``r`` (a snapshot read), ``c`` (insert), ``u`` (update: ``after`` is the whole
  new row) or ``d`` (delete: ``after`` is null); a delete is followed by a tombstone, a
  record with the same key and a null value, so that compaction (and kshim's ``T.full``)
  can drop the row.

With ``schemas.enable=true`` (JsonConverter's default) the key and the value are each
``{"schema": ..., "payload": ...}``: the Connect schema names every column's type, so the
change carries portable column types and a destination can create its tables, as with
kshim's own format. Debezium's representations (https://debezium.io/documentation/reference/3.1/connectors/postgresql.html#postgresql-data-types)
are decoded by the schema's logical type names: ``Decimal`` (base64 of the unscaled
two's-complement integer, with the scale in the schema; a JSON number with
``decimal.format=NUMERIC``), ``VariableScaleDecimal``, ``Date`` (days since 1970-01-01),
``Timestamp``, ``MicroTimestamp`` and ``NanoTimestamp`` (since the epoch, UTC),
``ZonedTimestamp`` (ISO-8601 text, turned to naive UTC), and the text types ``Json``,
``Uuid``, ``Xml``, ``Enum``. Times of day, intervals and geometries have no portable type:
such a column stops the apply job with an error naming it.

Schema changes: the PostgreSQL connector emits no schema-change events; each change
carries the schema it was written under. When that differs from the destination table's
columns, the change carries the table's new schema (``Change.schema``: the fields as
columns, the fields' defaults as defaults) and the sink brings the table to it first,
as it does for kshim's schema records. A dropped column is therefore seen at the table's
next change, not at the DDL.

Without schemas (``schemas.enable=false``) the records carry only the payloads, so the
destination table must exist: values are read by its columns' portable types, in
Debezium's default representations for PostgreSQL: a date as days since the epoch, a
timestamp as microseconds since the epoch (``time.precision.mode=adaptive`` for
``timestamp`` and ``timestamp(4..6)``; columns of precision 0 to 3 arrive in milliseconds
and need schemas) or ISO-8601 text, a blob as base64, a numeric as text or a JSON number
(set ``decimal.handling.mode=string``: the default's base64 bytes cannot be read without
the scale).
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, TypeAlias

from spark_examples import databases
from spark_examples.change_format import Change, JsonRow, encode_json_value
from spark_examples.databases import Columns, PortableType, PortableValue, Row
from spark_examples.databases.schema import TableSchema

# kshim's full-data view of topic T is named T + this (kshim/broker/full_view/naming.py).
VIEW_SUFFIX = ".full"
UPSERTS = {"r": "insert", "c": "insert", "u": "update"}
DELETE = "d"
EPOCH = datetime.datetime(1970, 1, 1)  # Debezium's times are UTC; portable ones naive UTC

# The destination's columns of a table (portable types), or None when it has no such table.
ColumnLookup: TypeAlias = Callable[[str], Columns | None]
# (table, primary key as kshim's JSON values, the change or None for a delete)
DecodedChange: TypeAlias = tuple[str, JsonRow, Change | None]
# A Connect schema of one field: {"type": "int32", "name": ..., "parameters": ..., "field": ...}
FieldSchema: TypeAlias = Mapping[str, Any]

_DATE_NAMES = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
_TIMESTAMP_UNITS = {  # logical name -> microseconds per unit
    "io.debezium.time.Timestamp": 1000,
    "org.apache.kafka.connect.data.Timestamp": 1000,
    "io.debezium.time.MicroTimestamp": 1,
}
_NANO_TIMESTAMP = "io.debezium.time.NanoTimestamp"
_TEXT_TIMESTAMPS = {"io.debezium.time.ZonedTimestamp", "io.debezium.time.IsoTimestamp"}
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_TEXT_NAMES = {
    "io.debezium.data.Json", "io.debezium.data.Uuid", "io.debezium.data.Xml",
    "io.debezium.data.Enum", "io.debezium.data.EnumSet", "io.debezium.data.Ltree",
}  # fmt: skip
# Connect's schema types as JsonConverter spells them (float32 and float64 are "float" and
# "double" there).
_PLAIN_TYPES: dict[str, PortableType] = {
    "int8": "integer", "int16": "integer", "int32": "integer", "int64": "integer",
    "float": "real", "double": "real", "boolean": "boolean", "string": "text",
    "bytes": "blob",
}  # fmt: skip
_NAMED_BYTES = {"io.debezium.data.Bits"}


def table_of_topic(topic: str) -> str:
    """The destination table of a Debezium topic: the last part of ``prefix.schema.table``
    (of ``T`` for the view ``T.full``)."""
    if topic.endswith(VIEW_SUFFIX):
        topic = topic[: -len(VIEW_SUFFIX)]
    return topic.rsplit(".", 1)[-1]


def decode_change(
    topic: str, key: bytes | None, value: bytes | None, destination: ColumnLookup
) -> DecodedChange:
    """The change one Debezium record holds; ``destination`` gives the destination's columns
    (read only without schemas). Raises ValueError for a record that is not a change event
    of a supported kind (a truncate, a message, a heartbeat) or a value it cannot read."""
    table = table_of_topic(topic)
    if key is None:
        raise ValueError("a Debezium change needs a key (the row's primary key)")
    try:
        key_schema, key_payload = _envelope(key)
        envelope_schema, envelope = (None, None) if value is None else _envelope(value)
        if envelope is None or envelope.get("op") == DELETE:
            columns = None if key_schema is not None else destination(table)
            return table, _key_json(key_schema, key_payload, columns), None
        return _upsert(table, key_schema, key_payload, envelope_schema, envelope, destination)
    except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as error:
        raise ValueError(f"malformed Debezium change: {error!r}") from error


def _envelope(data: bytes) -> tuple[Mapping[str, Any] | None, Any]:
    """(schema or None, payload) of JsonConverter's output, with or without schemas.
    Decimals stay exact: JSON numbers with a fraction are read as Decimal."""
    document = json.loads(data.decode("utf-8"), parse_float=Decimal)
    if isinstance(document, dict) and set(document) == {"schema", "payload"}:
        return document["schema"], document["payload"]
    return None, document


def _upsert(
    table: str,
    key_schema: Mapping[str, Any] | None,
    key_payload: Any,
    envelope_schema: Mapping[str, Any] | None,
    envelope: Mapping[str, Any],
    destination: ColumnLookup,
) -> DecodedChange:
    op = envelope.get("op")
    if op not in UPSERTS:
        raise ValueError(f"unsupported Debezium operation {op!r} (r, c, u and d are applied)")
    after = envelope["after"]
    if envelope_schema is not None:
        fields = _struct_fields(envelope_schema, "after")
        columns = {name: _portable_type(name, schema) for name, schema in fields.items()}
        row = {name: _decode_by_schema(fields[name], after.get(name)) for name in fields}
    else:
        known = destination(table)
        if known is None:
            raise ValueError(
                f"without schemas (schemas.enable=false) the destination table {table!r} "
                "must exist: its column types are what the values are read by"
            )
        columns, row = _decode_by_destination(table, known, after)
    missing = [name for name in key_payload if row.get(name) is None]
    if missing:
        raise ValueError(f"row image lacks primary key column(s) {missing}")
    key = _key_json(key_schema, key_payload, columns)
    source = envelope.get("source") or {}
    sequence = source.get("lsn")
    known = destination(table)
    change = Change(
        seq=int(sequence) if sequence is not None else -1,
        op=UPSERTS[op],
        table=table,
        columns=columns,
        row=row,
        schema=None
        if envelope_schema is None or known is None or known == columns
        else _table_schema(table, _struct_fields(envelope_schema, "after"), columns, key),
    )
    return table, key, change


def _table_schema(
    table: str, fields: Mapping[str, FieldSchema], columns: Columns, key: JsonRow
) -> TableSchema:
    """The table's schema as a record's Connect schema gives it: the PostgreSQL connector
    has no schema-change events, each change carries the schema it was written under.
    A field's ``default`` is the column's default (Debezium sets it from the column)."""
    defaults = {
        name: _decode_by_schema(field, field["default"])
        for name, field in fields.items()
        if field.get("default") is not None
    }
    required = [name for name, field in fields.items() if not field.get("optional", True)]
    primary_key = tuple(name for name in columns if name in key)
    not_null = tuple(name for name in required if name not in primary_key)
    return TableSchema(table, columns, primary_key, not_null, defaults)


def _struct_fields(schema: Mapping[str, Any], field: str | None) -> dict[str, FieldSchema]:
    """The fields of a struct schema (of its field ``field`` when given), by name."""
    if field is not None:
        schema = next(item for item in schema["fields"] if item["field"] == field)
    return {item["field"]: item for item in schema["fields"]}


def _key_json(
    key_schema: Mapping[str, Any] | None, payload: Mapping[str, Any], columns: Columns | None
) -> JsonRow:
    """The primary key in kshim's JSON form (what the sink's deletes decode)."""
    if key_schema is not None:
        fields = _struct_fields(key_schema, None)
        decoded = {name: _decode_by_schema(fields[name], payload[name]) for name in payload}
    elif columns is not None:
        decoded = {
            name: _decode_by_portable(columns[name], payload[name], name)
            if name in columns
            else payload[name]
            for name in payload
        }
    else:  # a delete in a table the destination lacks: a no-op, the key is never used
        decoded = dict(payload)
    return {name: encode_json_value(value) for name, value in decoded.items()}


def _portable_type(column: str, schema: FieldSchema) -> PortableType:
    name, kind = schema.get("name"), schema["type"]
    if name is None or name in _NAMED_BYTES:
        if kind in _PLAIN_TYPES:
            return _PLAIN_TYPES[kind]
    elif name in _DATE_NAMES or name == "io.debezium.time.IsoDate":
        return "date"
    elif name in _TIMESTAMP_UNITS or name == _NANO_TIMESTAMP or name in _TEXT_TIMESTAMPS:
        return "timestamp"
    elif name in (_DECIMAL, _VARIABLE_SCALE_DECIMAL):
        return "numeric"
    elif name in _TEXT_NAMES:
        return "text"
    raise ValueError(
        f"column {column!r}: Connect type {name or kind!r} has no portable type "
        "(times of day, intervals, geometries and nested values are not synchronised)"
    )


def _decode_by_schema(schema: FieldSchema, value: Any) -> PortableValue:
    """The python value of one payload value of the given Connect schema."""
    if value is None:
        return None
    name = schema.get("name")
    column = str(schema.get("field"))
    kind = _portable_type(column, schema)
    if name == _DECIMAL:
        return _decimal(value, int(schema.get("parameters", {}).get("scale", 0)))
    if name == _VARIABLE_SCALE_DECIMAL:
        return _decimal(value["value"], int(value["scale"]))
    if name in _DATE_NAMES:
        return EPOCH.date() + datetime.timedelta(days=int(value))
    if name in _TIMESTAMP_UNITS:
        return EPOCH + datetime.timedelta(microseconds=int(value) * _TIMESTAMP_UNITS[name])
    if name == _NANO_TIMESTAMP:
        return EPOCH + datetime.timedelta(microseconds=int(value) // 1000)
    if kind == "real":
        return float(value)
    return databases.decode_value(kind, value)


def _decimal(value: Any, scale: int) -> Decimal:
    if isinstance(value, Decimal | int):  # decimal.format=NUMERIC writes a JSON number
        return Decimal(value)
    unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
    return Decimal(unscaled).scaleb(-scale)


def _decode_by_destination(
    table: str, columns: Columns, after: Mapping[str, Any]
) -> tuple[Columns, Row]:
    unknown = [name for name in after if name not in columns]
    if unknown:
        raise ValueError(f"the destination table {table!r} lacks column(s) {unknown}")
    kept = {name: columns[name] for name in after}
    return kept, {name: _decode_by_portable(kept[name], after[name], name) for name in kept}


def _decode_by_portable(kind: PortableType, value: Any, column: str) -> PortableValue:
    """A schemaless payload value read as the destination column's portable type."""
    if value is None:
        return None
    if kind == "date" and isinstance(value, int):
        return EPOCH.date() + datetime.timedelta(days=value)
    if kind == "timestamp" and isinstance(value, int):
        return EPOCH + datetime.timedelta(microseconds=value)
    if kind == "numeric":
        try:
            return Decimal(value if isinstance(value, Decimal | int) else str(value))
        except InvalidOperation:
            raise ValueError(
                f"column {column!r}: {value!r} is not a number; without schemas set the "
                "connector's decimal.handling.mode=string (or double)"
            ) from None
    if kind == "real":
        return float(value)
    return databases.decode_value(kind, value)
