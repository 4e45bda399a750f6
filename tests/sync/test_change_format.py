"""spark_examples.change_format: record keys and values of captured changes."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pytest

from spark_examples.change_format import (
    Change,
    decode_any_key,
    decode_key,
    decode_row,
    decode_value,
    encode_key,
    encode_schema_key,
    encode_value,
)

COLUMNS = {
    "id": "integer",
    "ratio": "real",
    "price": "numeric",
    "name": "text",
    "payload": "blob",
    "active": "boolean",
    "born": "date",
    "seen": "timestamp",
}
ROW = {
    "id": 7,
    "ratio": 0.1,
    "price": Decimal("1234567890.0123456789"),
    "name": 'naïve "quoted"',
    "payload": b"\x00\x01\xfe",
    "active": False,
    "born": datetime.date(1999, 12, 31),
    "seen": datetime.datetime(2024, 2, 29, 23, 59, 59, 999999),
}


def test_key_is_compact_sorted_and_deterministic() -> None:
    assert encode_key("orders", {"id": 1}) == b'{"pk":{"id":1},"table":"orders"}'
    assert encode_key("t", {"b": 2, "a": "x"}) == encode_key("t", {"a": "x", "b": 2})
    assert decode_key(encode_key("t", {"b": 2, "a": "x"})) == ("t", {"a": "x", "b": 2})


def test_any_key_is_read_in_one_parse_as_a_row_or_a_schema_key() -> None:
    assert decode_any_key(encode_key("t", {"b": 2, "a": "x"})) == ("t", {"a": "x", "b": 2})
    assert decode_any_key(encode_schema_key("orders", 17)) == ("orders", None)
    with pytest.raises(KeyError):
        decode_any_key(b'{"table":"t"}')
    with pytest.raises(ValueError):
        decode_any_key(b"not json")


def test_value_round_trips_every_type_exactly() -> None:
    value = encode_value(17, "update", "things", COLUMNS, ROW)
    assert decode_value(value) == Change(17, "update", "things", COLUMNS, ROW)
    document = json.loads(value)
    assert list(document["columns"]) == list(COLUMNS)  # column order is kept
    assert document["row"]["price"] == "1234567890.0123456789"  # numeric as a string
    assert document["row"]["payload"] == {"$base64": "AAH+"}
    assert document["row"]["seen"] == "2024-02-29T23:59:59.999999"


def test_nulls_and_missing_columns_are_null() -> None:
    value = encode_value(1, "insert", "things", COLUMNS, {"id": 1})
    assert decode_value(value).row == {"id": 1, **dict.fromkeys(list(COLUMNS)[1:])}


def test_decode_row_reads_loosely_typed_json() -> None:
    row = decode_row({"id": "integer", "ok": "boolean", "n": "numeric"}, {"id": 3, "ok": 1, "n": 2})
    assert row == {"id": 3, "ok": True, "n": Decimal(2)}


def test_bad_operation_and_malformed_values_are_rejected() -> None:
    with pytest.raises(ValueError, match="op must be"):
        encode_value(1, "delete", "t", {"id": "integer"}, {"id": 1})
    with pytest.raises(ValueError, match="malformed"):
        decode_value(b'{"seq": 1}')
    with pytest.raises(ValueError, match="malformed"):
        decode_value(b"\xff")


def test_each_columns_document_is_checked_even_after_a_like_one_was_read() -> None:
    """Columns documents are checked once each and remembered (change_format.py): a bad one
    must still be refused, whatever was read before it."""
    good = encode_value(1, "insert", "t", {"id": "integer"}, {"id": 1})
    assert decode_value(good).row == decode_value(good).row == {"id": 1}
    with pytest.raises(ValueError, match="unknown portable types"):
        decode_value(b'{"seq":2,"op":"insert","table":"t","columns":{"id":"integr"},"row":{}}')
    with pytest.raises(ValueError, match="malformed"):  # a type that is no string at all
        decode_value(b'{"seq":2,"op":"insert","table":"t","columns":{"id":["integer"]},"row":{}}')
    with pytest.raises(ValueError, match="malformed"):
        decode_value(b'{"seq":2,"op":"insert","table":"t","columns":[1],"row":{}}')


def test_a_change_s_loosely_typed_values_take_their_column_s_type() -> None:
    value = (
        b'{"seq":1,"op":"insert","table":"t","columns":{"id":"integer","ratio":"real",'
        b'"ok":"boolean","n":"numeric"},"row":{"id":"7","ratio":5,"ok":1,"n":"1.50"}}'
    )
    row = decode_value(value).row
    assert row == {"id": 7, "ratio": 5.0, "ok": True, "n": Decimal("1.50")}
    assert (type(row["ratio"]), type(row["ok"])) == (float, bool)
