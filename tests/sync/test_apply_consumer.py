"""The apply sink fed by a plain consumer (spark_examples/apply/consumer.py), and the array
upserts of the sink's fast path (spark_examples/apply/bulk.py)."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kshim.testing import BrokerProcess
from spark_examples.apply.bulk import upsert_rows
from spark_examples.apply.consumer import consume_and_apply
from spark_examples.apply.sink import BatchResult
from spark_examples.capture.broker import ensure_topic
from spark_examples.change_format import encode_key, encode_value
from spark_examples.databases import Columns, Database, open_database

TIMEOUT_S = 30.0
COLUMNS: Columns = {"id": "integer", "name": "text"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "broker").start()
    try:
        yield process
    finally:
        process.stop()


def _send(producer: Producer, topic: str, row_id: int, name: str) -> None:
    row = {"id": row_id, "name": name}
    producer.produce(
        topic, encode_value(row_id, "insert", "t", COLUMNS, row), encode_key("t", {"id": row_id})
    )


def test_consumer_applies_committed_changes_only(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, dest = "changes", f"sqlite:///{tmp_path}/dest.db"
    ensure_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "test-tx"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    _send(producer, topic, 1, "aborted")
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    _send(producer, topic, 2, "committed")
    producer.commit_transaction(TIMEOUT_S)

    stop, batches = threading.Event(), []

    def on_batch(result: BatchResult) -> None:
        batches.append(result)
        stop.set()  # everything committed came in one poll or more: the wait below ends

    thread = threading.Thread(
        target=consume_and_apply, args=(broker.bootstrap, topic, dest, stop), daemon=True,
        kwargs={"on_batch": on_batch},
    )  # fmt: skip
    thread.start()
    assert stop.wait(TIMEOUT_S), "no batch applied"
    thread.join(TIMEOUT_S)
    database = open_database(dest)
    try:
        assert [row["name"] for row in database.rows("t")] == ["committed"]
    finally:
        database.close()


@pytest.mark.parametrize("engine", ["duckdb", "postgresql"])
def test_array_upsert_takes_every_portable_type_and_all_null_columns(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        request.getfixturevalue("postgres_url") if engine == "postgresql"
        else f"duckdb:///{tmp_path}/d.duckdb"
    )  # fmt: skip
    columns: Columns = {
        "id": "integer", "amount": "real", "price": "numeric", "note": "text",
        "payload": "blob", "active": "boolean", "day": "date", "at": "timestamp",
    }  # fmt: skip
    rows = [
        [1, 1.5, Decimal("2.25"), None, b"\x00\x01", True, datetime.date(2026, 1, 2),
         datetime.datetime(2026, 1, 2, 3, 4, 5)],
        [2, None, None, None, None, None, None, None],
    ]  # fmt: skip
    database: Database = open_database(url)
    try:
        database.create_table("t", columns, ["id"])
        with database.transaction():
            upsert_rows(database, "t", list(columns), rows)
            upsert_rows(database, "t", ["id", "note"], [[2, "replaced"]])
        found = [list(row.values()) for row in database.rows("t")]
    finally:
        database.close()
    assert found == [rows[0], [2, *rows[1][1:3], "replaced", *rows[1][4:]]]
