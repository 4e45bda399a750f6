"""The apply job's sink without Spark: ``apply.sink.apply_batch`` on real databases.

Replays are idempotent, offsets below the stored next offset are skipped, deletes of absent
rows are no-ops, a failing record is retried a bounded number of times and then named (never
skipped), and every portable type survives the trip into SQLite, DuckDB and PostgreSQL.
"""

from __future__ import annotations

import datetime
import random
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spark_examples.apply.sink import (
    ApplyError,
    SourceRecord,
    apply_batch,
    ensure_state_table,
    next_offset,
)
from spark_examples.change_format import encode_key, encode_value
from spark_examples.databases import Database, open_database

TOPIC = "orders-topic"
COLUMNS = {"id": "integer", "name": "text"}


class Log:
    """Builds the records a capture would produce, at consecutive offsets."""

    def __init__(self, topic: str = TOPIC, partition: int = 0) -> None:
        self.topic, self.partition = topic, partition
        self.records: list[SourceRecord] = []

    def _add(self, key: bytes | None, value: bytes | None) -> SourceRecord:
        record = SourceRecord(self.topic, self.partition, len(self.records), key, value)
        self.records.append(record)
        return record

    def upsert(self, row: dict[str, Any], table: str = "t", columns: Any = None) -> SourceRecord:
        columns = columns or COLUMNS
        key = {name: row[name] for name in ("id", "day") if name in row and name in columns}
        value = encode_value(len(self.records), "update", table, columns, row)
        return self._add(encode_key(table, key), value)

    def delete(self, key: dict[str, Any], table: str = "t") -> SourceRecord:
        return self._add(encode_key(table, key), None)


def no_sleep(_: float) -> None:
    """Retries in these tests need no real backoff."""


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    database = open_database(f"sqlite:///{tmp_path}/dest.db")
    ensure_state_table(database)
    yield database
    database.close()


def rows(database: Database, table: str = "t") -> list[dict[str, Any]]:
    return list(database.rows(table))


def test_replaying_a_batch_changes_nothing(sqlite_db: Database) -> None:
    log = Log()
    log.upsert({"id": 1, "name": "a"})
    log.upsert({"id": 2, "name": "b"})
    log.delete({"id": 1})
    log.upsert({"id": 2, "name": "c"})
    first = apply_batch(sqlite_db, log.records)
    assert (first.applied, first.skipped, first.attempts) == (4, 0, 1)
    replay = apply_batch(sqlite_db, log.records)
    assert (replay.applied, replay.skipped) == (0, 4)
    assert rows(sqlite_db) == [{"id": 2, "name": "c"}]
    assert next_offset(sqlite_db, TOPIC, 0) == 4


def test_records_below_the_next_offset_are_skipped(sqlite_db: Database) -> None:
    log = Log()
    for number in range(10):
        log.upsert({"id": number, "name": f"v{number}"})
    apply_batch(sqlite_db, log.records[:6])
    # A replay overlapping what was applied: offsets 3..5 must not be applied again, even
    # with different contents (a destination never goes back in time).
    stale = [
        SourceRecord(TOPIC, 0, offset, encode_key("t", {"id": 0}), log.records[offset].value)
        for offset in (3, 4, 5)
    ]
    result = apply_batch(sqlite_db, stale + log.records[6:])
    assert (result.applied, result.skipped) == (4, 3)
    assert rows(sqlite_db) == [{"id": n, "name": f"v{n}"} for n in range(10)]
    assert next_offset(sqlite_db, TOPIC, 0) == 10


def test_partitions_keep_their_own_next_offset(sqlite_db: Database) -> None:
    zero, one = Log(partition=0), Log(partition=1)
    zero.upsert({"id": 1, "name": "p0"})
    for number in range(2, 5):
        one.upsert({"id": number, "name": "p1"})
    apply_batch(sqlite_db, one.records + zero.records)
    assert (next_offset(sqlite_db, TOPIC, 0), next_offset(sqlite_db, TOPIC, 1)) == (1, 3)
    zero.upsert({"id": 9, "name": "p0"})
    assert apply_batch(sqlite_db, zero.records + one.records).applied == 1


def test_records_are_applied_in_offset_order_whatever_the_input_order(
    sqlite_db: Database,
) -> None:
    log = Log()
    for version in range(20):
        log.upsert({"id": 1, "name": f"v{version}"})
    log.delete({"id": 1})
    log.upsert({"id": 1, "name": "last"})
    shuffled = list(log.records)
    random.Random(7).shuffle(shuffled)
    apply_batch(sqlite_db, shuffled)
    assert rows(sqlite_db) == [{"id": 1, "name": "last"}]


def test_deleting_an_absent_row_or_table_is_no_error(sqlite_db: Database) -> None:
    log = Log()
    log.delete({"id": 5}, table="never_created")
    log.upsert({"id": 1, "name": "a"})
    log.delete({"id": 2})
    result = apply_batch(sqlite_db, log.records)
    assert (result.applied, result.attempts) == (3, 1)
    assert rows(sqlite_db) == [{"id": 1, "name": "a"}]
    assert not sqlite_db.table_exists("never_created")


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_a_new_table_is_looked_up_once_however_many_deletes_precede_it(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch, coalesce: bool
) -> None:
    questions: list[str] = []
    table_exists = sqlite_db.table_exists

    def counted(table: str) -> bool:
        questions.append(table)
        return table_exists(table)

    monkeypatch.setattr(sqlite_db, "table_exists", counted)
    log = Log()
    for number in range(50):  # rows the destination never had, of a table it lacks
        log.delete({"id": number}, table="fresh")
    log.upsert({"id": 100, "name": "x"}, table="fresh")
    log.delete({"id": 7}, table="fresh")
    apply_batch(sqlite_db, log.records, coalesce=coalesce)
    assert rows(sqlite_db, "fresh") == [{"id": 100, "name": "x"}]
    assert questions == ["fresh"]


def test_a_failing_record_is_retried_then_named_and_nothing_is_committed(
    tmp_path: Path, sqlite_db: Database
) -> None:
    # The destination has a constraint the source lacks: offset 2 can never be applied.
    sqlite_db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT CHECK (name <> 'bad'))")
    log = Log()
    log.upsert({"id": 1, "name": "ok"})
    log.upsert({"id": 2, "name": "ok"})
    log.upsert({"id": 3, "name": "bad"})
    log.upsert({"id": 4, "name": "ok"})
    pauses: list[float] = []
    with pytest.raises(ApplyError) as raised:
        apply_batch(sqlite_db, log.records, max_retries=2, backoff_s=0.5, sleep=pauses.append)
    assert raised.value.record == log.records[2]
    assert raised.value.attempts == 3
    assert f"topic {TOPIC} partition 0 offset 2" in str(raised.value)
    assert '"id":3' in str(raised.value)
    assert pauses == [0.5, 1.0]  # bounded, growing backoff
    assert rows(sqlite_db) == []  # the records before it were rolled back with it
    assert next_offset(sqlite_db, TOPIC, 0) == 0
    # Never skipped: the restarted job replays the batch, with more behind it, and stops again.
    log.upsert({"id": 5, "name": "ok"})
    with pytest.raises(ApplyError) as again:
        apply_batch(sqlite_db, log.records, max_retries=0, sleep=no_sleep)
    assert again.value.record is not None and again.value.record.offset == 2
    assert rows(sqlite_db) == []


def test_a_retry_succeeds_once_the_cause_is_gone(tmp_path: Path, sqlite_db: Database) -> None:
    sqlite_db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
    sqlite_db.execute("INSERT INTO t VALUES (99, 'taken')")
    log = Log()
    log.upsert({"id": 1, "name": "taken"})

    def operator_fixes_the_row(_: float) -> None:
        # Another connection, as an operator would: the batch's transaction was rolled back.
        with sqlite3.connect(tmp_path / "dest.db") as connection:
            connection.execute("DELETE FROM t WHERE id = 99")

    result = apply_batch(sqlite_db, log.records, max_retries=3, sleep=operator_fixes_the_row)
    assert result.attempts == 2
    assert rows(sqlite_db) == [{"id": 1, "name": "taken"}]


def test_a_record_without_key_stops_the_batch(sqlite_db: Database) -> None:
    log = Log()
    log.upsert({"id": 1, "name": "a"})
    log._add(None, b"{}")
    with pytest.raises(ApplyError) as raised:
        apply_batch(sqlite_db, log.records, max_retries=0, sleep=no_sleep)
    assert "offset 1" in str(raised.value)


ALL_TYPES = {
    "id": "integer",
    "day": "date",
    "amount": "numeric",
    "ratio": "real",
    "label": "text",
    "payload": "blob",
    "active": "boolean",
    "seen_at": "timestamp",
}


def typed_row(number: int, **changes: Any) -> dict[str, Any]:
    row = {
        "id": number,
        "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=number),
        "amount": Decimal(f"{number}.25"),
        "ratio": number / 4,
        "label": f"é {number} ✓",
        "payload": bytes([number, 0, 255]),
        "active": number % 2 == 0,
        "seen_at": datetime.datetime(2024, 5, 6, 7, 8, 9, 123000),
    }
    return {**row, **changes}


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_every_portable_type_survives_each_engine(any_database: Database, coalesce: bool) -> None:
    log = Log()
    for number in range(1, 6):
        log.upsert(typed_row(number), table="typed", columns=ALL_TYPES)
    nulls = {name: None for name in ALL_TYPES if name not in ("id", "day")}
    log.upsert(typed_row(2, **nulls), table="typed", columns=ALL_TYPES)
    log.delete({"id": 3, "day": "2024-01-04"}, table="typed")  # the key as the capture sends it
    apply_batch(any_database, log.records[:3], coalesce=coalesce)
    apply_batch(any_database, log.records[3:], coalesce=coalesce)
    assert any_database.table_columns("typed") == ALL_TYPES
    assert any_database.primary_key("typed") == ["id", "day"]
    expected = [typed_row(1), typed_row(2, **nulls), typed_row(4), typed_row(5)]
    assert list(any_database.rows("typed")) == expected


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_rows_keyed_by_a_blob_are_told_apart_and_keep_their_last_change(
    any_database: Database, coalesce: bool
) -> None:
    """A blob key's JSON ({"$base64": ...}) is no hashable value: the batch's rows are still
    told apart by key, and each keeps its last change."""
    columns = {"code": "blob", "name": "text"}
    log = Log()
    for code, name in ((b"\x01", "a"), (b"\x02", "b"), (b"\x01", "c")):
        row = {"code": code, "name": name}
        value = encode_value(len(log.records), "update", "blobs", columns, row)
        log._add(encode_key("blobs", {"code": code}), value)
    apply_batch(any_database, log.records, coalesce=coalesce)
    stored = sorted(rows(any_database, "blobs"), key=lambda row: row["code"])
    assert stored == [{"code": b"\x01", "name": "c"}, {"code": b"\x02", "name": "b"}]


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_random_batches_match_a_model_on_each_engine(
    any_database: Database, coalesce: bool
) -> None:
    generator = random.Random(11)
    log, model = Log(), {}
    for _ in range(1500):
        number = generator.randrange(60)
        if generator.random() < 0.3:
            log.delete({"id": number})
            model.pop(number, None)
        else:
            row = {"id": number, "name": f"{generator.random():.6f}"}
            log.upsert(row)
            model[number] = row
    start = 0
    while start < len(log.records):
        end = start + generator.randrange(1, 400)
        # Each batch re-sends a few already-applied records, as a replay would.
        apply_batch(any_database, log.records[max(0, start - 20) : end], coalesce=coalesce)
        start = end
    assert rows(any_database) == [model[number] for number in sorted(model)]
    assert next_offset(any_database, TOPIC, 0) == len(log.records)
