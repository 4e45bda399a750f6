"""The apply job's sink on Debezium's change events (``--format debezium``), without Spark:
snapshots, inserts, updates, deletes and tombstones from several topics into SQLite, DuckDB
and PostgreSQL, replays skipped, with and without JsonConverter's schemas."""

from __future__ import annotations

import datetime
import random
from decimal import Decimal
from typing import Any

import pytest

from spark_examples.apply.sink import (
    ApplyError,
    SourceRecord,
    apply_batch,
    decode_debezium,
    next_offset,
)
from spark_examples.databases import Columns, Database
from tests.sync.debezium_records import CUSTOMER_FIELDS, customer, key_bytes, value_bytes

CUSTOMERS = "shop.public.customers"
ORDERS = "shop.public.orders"
ORDER_FIELDS = {"id": CUSTOMER_FIELDS["id"], "note": {"type": "string", "optional": True}}
CUSTOMER_COLUMNS: Columns = {
    "id": "integer", "name": "text", "balance": "numeric", "born": "date",
    "seen": "timestamp", "active": "boolean", "photo": "blob", "score": "real",
}  # fmt: skip


class Topics:
    """Debezium's records on several topics, each at its own consecutive offsets."""

    def __init__(self, schemas: bool = True) -> None:
        self.schemas = schemas
        self.records: list[SourceRecord] = []
        self.next_offsets: dict[str, int] = {}

    def _add(self, topic: str, identity: int, value: bytes | None) -> None:
        offset = self.next_offsets.get(topic, 0)
        self.next_offsets[topic] = offset + 1
        key = key_bytes({"id": identity}, topic, schemas=self.schemas)
        self.records.append(SourceRecord(topic, 0, offset, key, value))

    def change(self, topic: str, op: str, row: dict[str, Any]) -> None:
        fields = CUSTOMER_FIELDS if topic == CUSTOMERS else ORDER_FIELDS
        value = value_bytes(op, None, row, topic, fields, self.schemas)
        self._add(topic, row["id"], value)

    def delete(self, topic: str, identity: int) -> None:
        """A delete event, then its tombstone, as Debezium sends them."""
        fields = CUSTOMER_FIELDS if topic == CUSTOMERS else ORDER_FIELDS
        before = dict.fromkeys(fields) | {"id": identity}
        self._add(topic, identity, value_bytes("d", before, None, topic, fields, self.schemas))
        self._add(topic, identity, None)


def expected_customer(identity: int, name: str) -> dict[str, Any]:
    return {
        "id": identity,
        "name": name,
        "balance": Decimal(f"{identity}.25"),
        "born": datetime.date(1970, 1, 1) + datetime.timedelta(days=identity),
        "seen": datetime.datetime(1970, 1, 1, 0, 0, identity),
        "active": identity % 2 == 0,
        "photo": bytes([identity]),
        "score": identity / 4,
    }


def history(schemas: bool = True) -> Topics:
    """A snapshot, then changes on two topics whose keys collide (customer 1, order 1).
    Without schemas, numerics are text (the connector's decimal.handling.mode=string)."""
    topics = Topics(schemas)

    def customer_row(identity: int, name: str) -> dict[str, Any]:
        row = customer(
            identity, name, f"{identity}.25", identity, identity * 1_000_000,
            identity % 2 == 0, bytes([identity]), identity / 4,
        )  # fmt: skip
        return row if schemas else row | {"balance": f"{identity}.25"}

    for identity in range(1, 5):
        topics.change(CUSTOMERS, "r", customer_row(identity, f"customer {identity}"))
    topics.change(ORDERS, "r", {"id": 1, "note": "first order"})
    topics.change(CUSTOMERS, "c", customer_row(5, "new"))
    topics.change(CUSTOMERS, "u", customer_row(1, "renamed"))
    topics.delete(CUSTOMERS, 2)
    topics.change(ORDERS, "u", {"id": 1, "note": "changed"})
    topics.change(ORDERS, "c", {"id": 2, "note": "second"})
    topics.delete(ORDERS, 2)
    topics.change(CUSTOMERS, "c", customer_row(2, "back again"))
    return topics


EXPECTED_CUSTOMERS = [
    expected_customer(1, "renamed"),
    expected_customer(2, "back again"),
    expected_customer(3, "customer 3"),
    expected_customer(4, "customer 4"),
    expected_customer(5, "new"),
]


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_debezium_changes_on_each_engine(any_database: Database, coalesce: bool) -> None:
    topics = history()
    records = topics.records
    middle = len(records) // 2
    apply_batch(any_database, records[:middle], coalesce=coalesce, decoder=decode_debezium)
    # The second batch re-sends the first one's tail, as a replay would: skipped.
    result = apply_batch(
        any_database, records[middle - 3 :], coalesce=coalesce, decoder=decode_debezium
    )
    assert result.skipped == 3
    assert any_database.table_columns("customers") == CUSTOMER_COLUMNS
    assert any_database.primary_key("customers") == ["id"]
    assert list(any_database.rows("customers")) == EXPECTED_CUSTOMERS
    assert list(any_database.rows("orders")) == [{"id": 1, "note": "changed"}]
    for topic, end in topics.next_offsets.items():
        assert next_offset(any_database, topic, 0) == end


def test_without_schemas_into_tables_made_beforehand(any_database: Database) -> None:
    any_database.create_table("customers", CUSTOMER_COLUMNS, ["id"])
    any_database.create_table("orders", {"id": "integer", "note": "text"}, ["id"])
    topics = history(schemas=False)
    apply_batch(any_database, topics.records, decoder=decode_debezium)
    assert list(any_database.rows("customers")) == EXPECTED_CUSTOMERS
    assert list(any_database.rows("orders")) == [{"id": 1, "note": "changed"}]


def test_without_schemas_a_missing_table_stops_the_job_at_its_record(
    any_database: Database,
) -> None:
    topics = Topics(schemas=False)
    topics.change(ORDERS, "c", {"id": 1, "note": "no table for me"})
    with pytest.raises(ApplyError, match=r"offset 0 .*must exist") as failure:
        apply_batch(any_database, topics.records, max_retries=1, decoder=decode_debezium,
                    sleep=lambda _: None)  # fmt: skip
    assert failure.value.attempts == 2
    assert next_offset(any_database, ORDERS, 0) == 0


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_random_debezium_batches_match_a_model(any_database: Database, coalesce: bool) -> None:
    generator = random.Random(17)
    topics, model = Topics(), dict[int, dict[str, Any]]()
    for _ in range(800):
        identity = generator.randrange(40)
        if generator.random() < 0.3:
            topics.delete(ORDERS, identity)
            model.pop(identity, None)
        else:
            row = {"id": identity, "note": f"{generator.random():.6f}"}
            topics.change(ORDERS, generator.choice("cur"), row)
            model[identity] = row
    start = 0
    while start < len(topics.records):
        end = start + generator.randrange(1, 200)
        batch = topics.records[max(0, start - 10) : end]
        apply_batch(any_database, batch, coalesce=coalesce, decoder=decode_debezium)
        start = end
    assert list(any_database.rows("orders")) == [model[number] for number in sorted(model)]
