"""spark_examples.debezium_format: Debezium's change events read as the apply job's changes,
with and without JsonConverter's schemas, without Spark or Kafka Connect."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

import pytest

from spark_examples.databases import Columns
from spark_examples.debezium_format import decode_change, table_of_topic
from tests.sync.debezium_records import (
    CUSTOMER_FIELDS,
    customer,
    decimal_bytes,
    golden_snapshot,
    key_bytes,
    value_bytes,
)

TOPIC = "shop.public.customers"
PORTABLE: Columns = {
    "id": "integer", "name": "text", "balance": "numeric", "born": "date",
    "seen": "timestamp", "active": "boolean", "photo": "blob", "score": "real",
}  # fmt: skip
ROW = customer(1, "a", "1.50", 10958, 1577872800000000, True, b"\x01\x02", 1.5)
DECODED = {
    "id": 1,
    "name": "a",
    "balance": Decimal("1.50"),
    "born": datetime.date(2000, 1, 2),
    "seen": datetime.datetime(2020, 1, 1, 10, 0),
    "active": True,
    "photo": b"\x01\x02",
    "score": 1.5,
}


def no_destination(table: str) -> Columns | None:
    return None


def destination_with(columns: Columns) -> Any:
    return lambda table: columns if table == "customers" else None


def test_the_table_is_the_topic_names_last_part() -> None:
    assert table_of_topic("shop.public.customers") == "customers"
    assert table_of_topic("shop.public.customers.full") == "customers"
    assert table_of_topic("customers") == "customers"


def test_a_snapshot_record_as_connect_wrote_it() -> None:
    topic, key, value = golden_snapshot()
    table, key_json, change = decode_change(topic, key, value, no_destination)
    assert (table, key_json) == ("customers", {"id": 1})
    assert change is not None
    assert (change.op, change.table, change.seq) == ("insert", "customers", 22190872)
    assert change.columns == PORTABLE
    assert change.row == DECODED


@pytest.mark.parametrize(("op", "expected"), [("r", "insert"), ("c", "insert"), ("u", "update")])
def test_reads_inserts_and_updates_with_schemas(op: str, expected: str) -> None:
    value = value_bytes(op, None, ROW, lsn=7)
    table, key, change = decode_change(TOPIC, key_bytes({"id": 1}), value, no_destination)
    assert change is not None and (change.op, change.seq) == (expected, 7)
    assert (table, key, change.row, change.columns) == ("customers", {"id": 1}, DECODED, PORTABLE)


def test_a_delete_and_its_tombstone_are_deletes_of_the_key() -> None:
    key = key_bytes({"id": 5})
    delete = value_bytes("d", {"id": 5, **dict.fromkeys(list(ROW)[1:])}, None)
    assert decode_change(TOPIC, key, delete, no_destination) == ("customers", {"id": 5}, None)
    assert decode_change(TOPIC, key, None, no_destination) == ("customers", {"id": 5}, None)


def test_nulls_stay_nulls() -> None:
    row = customer(2, "b")
    _, _, change = decode_change(
        TOPIC, key_bytes({"id": 2}), value_bytes("c", None, row), no_destination
    )
    assert change is not None
    assert change.row == {"id": 2, "name": "b"} | dict.fromkeys(list(PORTABLE)[2:])


@pytest.mark.parametrize(
    ("schema", "payload", "expected"),
    [
        # Connect's Decimal: negative, zero, and large unscaled values; NUMERIC as a number.
        (CUSTOMER_FIELDS["balance"], decimal_bytes(Decimal("-123.45"), 2), Decimal("-123.45")),
        (CUSTOMER_FIELDS["balance"], decimal_bytes(Decimal(0), 2), Decimal("0.00")),
        (CUSTOMER_FIELDS["balance"], decimal_bytes(Decimal("12345678901234567.89"), 2),
         Decimal("12345678901234567.89")),
        (CUSTOMER_FIELDS["balance"], 1.25, Decimal("1.25")),
        # numeric without precision: Debezium's VariableScaleDecimal struct
        ({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
         {"scale": 3, "value": decimal_bytes(Decimal("-0.5"), 3)}, Decimal("-0.500")),
        ({"type": "int64", "name": "io.debezium.time.Timestamp"}, 1577872800123,
         datetime.datetime(2020, 1, 1, 10, 0, 0, 123000)),
        ({"type": "int64", "name": "io.debezium.time.NanoTimestamp"}, 1577872800123456789,
         datetime.datetime(2020, 1, 1, 10, 0, 0, 123456)),
        ({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, -1,
         datetime.datetime(1969, 12, 31, 23, 59, 59, 999999)),
        ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
         "2020-01-01T12:00:00+02:00", datetime.datetime(2020, 1, 1, 10, 0)),
        ({"type": "int32", "name": "org.apache.kafka.connect.data.Date"}, -1,
         datetime.date(1969, 12, 31)),
        ({"type": "string", "name": "io.debezium.data.Json"}, '{"a": 1}', '{"a": 1}'),
        ({"type": "string", "name": "io.debezium.data.Uuid"},
         "0b1c2d3e-0000-4000-8000-000000000000", "0b1c2d3e-0000-4000-8000-000000000000"),
        ({"type": "float"}, 0.5, 0.5),
        ({"type": "int16"}, -3, -3),
    ],
)  # fmt: skip
def test_debezium_representations(schema: dict[str, Any], payload: Any, expected: Any) -> None:
    fields = {"id": CUSTOMER_FIELDS["id"], "value": schema}
    value = value_bytes("c", None, {"id": 1, "value": payload}, fields=fields)
    _, _, change = decode_change(TOPIC, key_bytes({"id": 1}), value, no_destination)
    assert change is not None
    decoded = change.row["value"]
    assert decoded == expected and type(decoded) is type(expected)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "int64", "name": "io.debezium.time.MicroTime"},
        {"type": "int64", "name": "io.debezium.time.MicroDuration"},
        {"type": "struct", "name": "io.debezium.data.geometry.Point"},
        {"type": "array"},
    ],
)
def test_a_column_without_a_portable_type_is_named(schema: dict[str, Any]) -> None:
    fields = {"id": CUSTOMER_FIELDS["id"], "opening": schema}
    value = value_bytes("c", None, {"id": 1, "opening": None}, fields=fields)
    with pytest.raises(ValueError, match="column 'opening'"):
        decode_change(TOPIC, key_bytes({"id": 1}), value, no_destination)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (value_bytes("t", None, None), "unsupported Debezium operation 't'"),
        (json.dumps({"ts_ms": 1}).encode(), "unsupported Debezium operation None"),
        (b"not json", "Expecting value"),
        (value_bytes("c", None, {"name": "no key"}), "lacks primary key"),
    ],
)
def test_what_is_not_a_change_is_refused(value: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_change(TOPIC, key_bytes({"id": 1}), value, no_destination)
    with pytest.raises(ValueError, match="needs a key"):
        decode_change(TOPIC, None, value, no_destination)


# -- without schemas (schemas.enable=false) ----------------------------------------------------
SCHEMALESS_ROW = ROW | {"balance": "1.50"}  # decimal.handling.mode=string


def test_without_schemas_values_are_read_by_the_destination_columns() -> None:
    value = value_bytes("u", None, SCHEMALESS_ROW, schemas=False, lsn=9)
    key = key_bytes({"id": 1}, schemas=False)
    table, key_json, change = decode_change(TOPIC, key, value, destination_with(PORTABLE))
    assert (table, key_json) == ("customers", {"id": 1})
    assert change is not None and (change.op, change.seq) == ("update", 9)
    assert change.row == DECODED and change.columns == PORTABLE


def test_without_schemas_numbers_iso_texts_and_keys_of_other_types() -> None:
    columns: Columns = {"day": "date", "at": "timestamp", "price": "numeric"}
    row = {"day": "2000-01-02", "at": "2020-01-01T12:00:00Z", "price": 2.5}
    key = key_bytes({"day": 10958}, schemas=False)
    value = value_bytes("c", None, row, schemas=False)
    _, key_json, change = decode_change(TOPIC, key, value, lambda table: columns)
    assert key_json == {"day": "2000-01-02"}
    assert change is not None
    assert change.row == {
        "day": datetime.date(2000, 1, 2),
        "at": datetime.datetime(2020, 1, 1, 12, 0),
        "price": Decimal("2.5"),
    }


def test_without_schemas_the_destination_table_must_exist() -> None:
    value = value_bytes("c", None, SCHEMALESS_ROW, schemas=False)
    key = key_bytes({"id": 1}, schemas=False)
    with pytest.raises(ValueError, match="destination table 'customers' must exist"):
        decode_change(TOPIC, key, value, no_destination)
    # A delete from a table the destination lacks is a no-op; it needs no types.
    delete = value_bytes("d", {"id": 1}, None, schemas=False)
    assert decode_change(TOPIC, key, delete, no_destination) == ("customers", {"id": 1}, None)


def test_without_schemas_precise_decimals_and_unknown_columns_are_refused() -> None:
    key = key_bytes({"id": 1}, schemas=False)
    precise = value_bytes("c", None, ROW, schemas=False)  # balance as base64 bytes
    with pytest.raises(ValueError, match=r"decimal\.handling\.mode=string"):
        decode_change(TOPIC, key, precise, destination_with(PORTABLE))
    narrower = {name: kind for name, kind in PORTABLE.items() if name != "score"}
    value = value_bytes("c", None, SCHEMALESS_ROW, schemas=False)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['score'\]"):
        decode_change(TOPIC, key, value, destination_with(narrower))
