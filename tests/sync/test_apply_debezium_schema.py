"""Schema changes in Debezium's records (the PostgreSQL connector: no schema-change events,
each change carries the schema it was written under), applied by the sink on each engine:
an added column with a default reaches the rows written before it, a dropped one goes, a
widened one widens, a narrowed one stops the batch naming table and column."""

from __future__ import annotations

from typing import Any

import pytest

from spark_examples.apply.sink import ApplyError, apply_batch, decode_debezium
from spark_examples.databases import Database
from tests.sync.debezium_records import key_bytes, record, value_bytes
from tests.sync.test_apply import no_sleep

TOPIC = "shop.public.accounts"
V1: dict[str, dict[str, Any]] = {
    "id": {"type": "int32", "optional": False},
    "name": {"type": "string", "optional": True},
    "visits": {"type": "int32", "optional": True},
}
# ALTER TABLE accounts ADD COLUMN tier text DEFAULT 'basic', DROP COLUMN name,
# ALTER COLUMN visits TYPE double precision
V2: dict[str, dict[str, Any]] = {
    "id": V1["id"],
    "visits": {"type": "double", "optional": True},
    "tier": {"type": "string", "optional": True, "default": "basic"},
}


def change(offset: int, row: dict[str, Any], fields: dict[str, Any]) -> Any:
    key = key_bytes({"id": row["id"]}, TOPIC, {"id": V1["id"]})
    return record(offset, key, value_bytes("c", None, row, TOPIC, fields), TOPIC)


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_debezium_schema_changes_on_each_engine(any_database: Database, coalesce: bool) -> None:
    first = [
        change(0, {"id": 1, "name": "a", "visits": 3}, V1),
        change(1, {"id": 2, "name": "b", "visits": 4}, V1),
    ]
    apply_batch(any_database, first, coalesce=coalesce, decoder=decode_debezium)
    second = [
        change(2, {"id": 2, "visits": 4.5, "tier": "gold"}, V2),
        change(3, {"id": 3, "visits": 1.0, "tier": "basic"}, V2),
    ]
    apply_batch(any_database, second, coalesce=coalesce, decoder=decode_debezium)
    any_database.forget_schema()
    assert any_database.table_columns("accounts") == {
        "id": "integer",
        "visits": "real",
        "tier": "text",
    }
    assert list(any_database.rows("accounts")) == [
        {"id": 1, "visits": 3.0, "tier": "basic"},  # the default, as the source gave it
        {"id": 2, "visits": 4.5, "tier": "gold"},
        {"id": 3, "visits": 1.0, "tier": "basic"},
    ]
    narrowed = {**V2, "visits": {"type": "int32", "optional": True}}
    with pytest.raises(ApplyError, match="table 'accounts' column 'visits'"):
        apply_batch(
            any_database,
            [change(4, {"id": 4, "visits": 2, "tier": "x"}, narrowed)],
            max_retries=0,
            sleep=no_sleep,
            decoder=decode_debezium,
        )
