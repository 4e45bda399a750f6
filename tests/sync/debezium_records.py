"""Debezium change events as the PostgreSQL connector and JsonConverter write them, built for
tests of the apply job's ``--format debezium`` without Kafka Connect.

The field schemas are those Debezium 3.1 gives PostgreSQL's column types under its defaults
(``decimal.handling.mode=precise``, ``time.precision.mode=adaptive``); the envelope holds the
fields the format reads (before, after, source, op). ``data/debezium_customers_snapshot.json``
is one record exactly as Connect wrote it, for comparison.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from spark_examples.apply.sink import SourceRecord

GOLDEN_SNAPSHOT = Path(__file__).parent / "data" / "debezium_customers_snapshot.json"
TOPIC = "shop.public.customers"

# column -> Connect field schema, for: id integer, name text, balance numeric(12,2), born
# date, seen timestamp, active boolean, photo bytea, score double precision
CUSTOMER_FIELDS: dict[str, dict[str, Any]] = {
    "id": {"type": "int32", "optional": False},
    "name": {"type": "string", "optional": True},
    "balance": {
        "type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "12"},
    },
    "born": {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1},
    "seen": {
        "type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp",
        "version": 1,
    },
    "active": {"type": "boolean", "optional": True},
    "photo": {"type": "bytes", "optional": True},
    "score": {"type": "double", "optional": True},
}  # fmt: skip
KEY_FIELDS = {"id": CUSTOMER_FIELDS["id"]}


def struct_schema(fields: dict[str, dict[str, Any]], name: str, optional: bool) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [{**schema, "field": column} for column, schema in fields.items()],
        "optional": optional,
        "name": name,
    }


def _document(schema: dict[str, Any], payload: Any, schemas: bool) -> bytes:
    document = {"schema": schema, "payload": payload} if schemas else payload
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def key_bytes(
    key: dict[str, Any], topic: str = TOPIC, fields: dict[str, Any] | None = None,
    schemas: bool = True,
) -> bytes:  # fmt: skip
    """The record key JsonConverter writes for a row's primary key."""
    schema = struct_schema(fields or KEY_FIELDS, f"{topic}.Key", optional=False)
    return _document(schema, key, schemas)


def value_bytes(
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    topic: str = TOPIC,
    fields: dict[str, Any] | None = None,
    schemas: bool = True,
    lsn: int = 0,
) -> bytes:
    """The record value of one change event (op r, c, u or d)."""
    row = struct_schema(fields or CUSTOMER_FIELDS, f"{topic}.Value", optional=True)
    source_fields = {
        "table": {"type": "string", "optional": False},
        "lsn": {"type": "int64", "optional": True},
    }
    envelope_fields = {
        "before": row,
        "after": row,
        "source": struct_schema(source_fields, "io.debezium.connector.postgresql.Source", False),
        "op": {"type": "string", "optional": False},
    }
    schema = {
        "type": "struct",
        "fields": [{**item, "field": name} for name, item in envelope_fields.items()],
        "optional": False,
        "name": f"{topic}.Envelope",
        "version": 2,
    }
    table = topic.rsplit(".", 1)[-1]
    payload = {"before": before, "after": after, "source": {"table": table, "lsn": lsn}, "op": op}
    return _document(schema, payload, schemas)


def decimal_bytes(value: Decimal, scale: int) -> str:
    """Connect's Decimal: base64 of the unscaled value, big-endian two's complement."""
    unscaled = int(value.scaleb(scale))
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode("ascii")


def customer(
    identity: int, name: str, balance: str | None = None, born_days: int | None = None,
    seen_micros: int | None = None, active: bool | None = None, photo: bytes | None = None,
    score: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A customers row as Debezium's payload holds it."""
    return {
        "id": identity,
        "name": name,
        "balance": None if balance is None else decimal_bytes(Decimal(balance), 2),
        "born": born_days,
        "seen": seen_micros,
        "active": active,
        "photo": None if photo is None else base64.b64encode(photo).decode("ascii"),
        "score": score,
    }


def record(offset: int, key: bytes, value: bytes | None, topic: str = TOPIC) -> SourceRecord:
    return SourceRecord(topic=topic, partition=0, offset=offset, key=key, value=value)


def golden_snapshot() -> tuple[str, bytes, bytes]:
    """(topic, key, value) of the snapshot record Connect wrote for customer 1."""
    document = json.loads(GOLDEN_SNAPSHOT.read_text(encoding="utf-8"))
    return document["topic"], _compact(document["key"]), _compact(document["value"])


def _compact(part: object) -> bytes:
    return json.dumps(part, separators=(",", ":")).encode("utf-8")
