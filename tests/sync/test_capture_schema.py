"""Schema changes from a SQLite source to SQLite, DuckDB and PostgreSQL, without Spark.

A real broker and the real capture (of every table, ``*``), the sink applying what the topic
holds after each stage, and the checker comparing schemas and rows: ADD COLUMN with a
default (the rows the source filled with it, and no later change touched, reach the
destinations with it), ADD COLUMN without one, DROP COLUMN, a widening (SQLite rebuilds
the table), a new table with rows written before the capture saw it, data changes before
and after each; then a destination bootstrapped from ``T.full``; then a narrowing, which
stops the apply until the operator fixes the destination.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kshim.testing import BrokerProcess
from spark_examples.apply.sink import ApplyError, SourceRecord, apply_batch, ensure_state_table
from spark_examples.capture import triggers
from spark_examples.capture.shipper import TriggersGone, run_capture
from spark_examples.change_format import schema_key_table
from spark_examples.databases import Database, open_database
from spark_examples.databases.schema import TableSchema, change_column_types
from spark_examples.testing import topic_end_offset, wait_until
from spark_examples.verify import compare_tables
from tests.sync.capture_helpers import create_items, read_topic
from tests.sync.test_apply import no_sleep

TOPIC = "shop"


class Pipeline:
    """The source, its capture to ``TOPIC`` and destinations fed by the sink."""

    def __init__(self, broker: BrokerProcess, source_url: str, dest_urls: list[str]) -> None:
        self.broker, self.source_url, self.dest_urls = broker, source_url, dest_urls
        self.source = open_database(source_url)
        self.dests = [open_database(url) for url in dest_urls]
        for dest in self.dests:
            ensure_state_table(dest)

    def records(self, topic: str = TOPIC) -> list[SourceRecord]:
        shipped = read_topic(self.broker.bootstrap, topic, schemas=True)
        return [SourceRecord(topic, 0, r.offset, r.key, r.value) for r in shipped]

    def sync(self, tables: list[str]) -> None:
        """Captures what the source logged, applies the topic, checks every destination."""
        run_capture(self.source_url, ["*"], self.broker.bootstrap, TOPIC, once=True)
        records = self.records()
        for dest in self.dests:
            apply_batch(dest, records, sleep=no_sleep)
        for url in self.dest_urls:
            assert compare_tables(self.source_url, url, tables) == []

    def close(self) -> None:
        for database in (self.source, *self.dests):
            database.close()


@pytest.fixture
def pipeline(
    request: pytest.FixtureRequest, review_broker: BrokerProcess, tmp_path: Path, postgres_url: str
) -> Iterator[Pipeline]:
    """A SQLite source (PostgreSQL with the parameter ``postgresql``: then the destination
    of that engine is SQLite again) and SQLite, DuckDB and PostgreSQL destinations."""
    source_url = f"sqlite:///{tmp_path}/source.db"
    dests = [f"sqlite:///{tmp_path}/dest.db", f"duckdb:///{tmp_path}/dest.duckdb", postgres_url]
    if getattr(request, "param", "sqlite") == "postgresql":
        source_url, dests[2] = postgres_url, f"sqlite:///{tmp_path}/dest2.db"
    pipeline = Pipeline(review_broker, source_url, dests)
    create_items(pipeline.source)
    pipeline.sync(["items"])  # the capture starts: triggers, the first schema, an empty table
    yield pipeline
    pipeline.close()


def widen_stock_to_real(source: Database) -> None:
    """PostgreSQL's ALTER COLUMN TYPE, or SQLite's way to change a column's type
    (https://sqlite.org/lang_altertable.html, section 7) with the capture's triggers put
    back in the same transaction."""
    if source.engine == "postgresql":
        source.execute("ALTER TABLE items ALTER COLUMN stock TYPE DOUBLE PRECISION")
        return
    columns = "id, name, price, stock, note"
    with source.transaction():
        source.execute(
            "CREATE TABLE items_new (id INTEGER PRIMARY KEY, name TEXT, price NUMERIC, "
            "stock REAL NOT NULL DEFAULT 7, note TEXT)"
        )
        source.execute(f"INSERT INTO items_new ({columns}) SELECT {columns} FROM items")
        source.execute("DROP TABLE items")
        source.execute("ALTER TABLE items_new RENAME TO items")
        triggers.install_capture(source, ["items"])


def evolve_source(source: Database, sync: Callable[[list[str]], None]) -> None:
    """Schema changes with data changes around them; ``sync(tables)`` after each stage
    captures, applies and checks. Ends with items(id, name, price, stock real, note) and
    orders(id, item_id, qty)."""
    for number in (1, 2, 3):
        source.execute(
            "INSERT INTO items (id, name, price, active) VALUES (?, ?, ?, ?)",
            [number, f"item {number}", f"{number}.5", True],
        )
    sync(["items"])
    source.execute("UPDATE items SET name = 'renamed' WHERE id = 1")
    source.execute("ALTER TABLE items ADD COLUMN stock INTEGER NOT NULL DEFAULT 7")
    source.execute("INSERT INTO items (id, name, stock) VALUES (4, 'four', 3)")
    source.execute("UPDATE items SET stock = 5 WHERE id = 2")
    sync(["items"])  # row 3 has stock 7 at the destinations only from the default
    source.execute("ALTER TABLE items ADD COLUMN note TEXT")
    source.execute("UPDATE items SET note = 'noted' WHERE id = 1")
    source.execute("ALTER TABLE items DROP COLUMN active")
    source.execute("UPDATE items SET name = 'after the drop' WHERE id = 2")
    sync(["items"])
    widen_stock_to_real(source)
    source.execute("UPDATE items SET stock = 2.5 WHERE id = 4")
    sync(["items"])
    source.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item_id INTEGER, qty INTEGER)")
    source.execute("INSERT INTO orders VALUES (1, 1, 10), (2, 4, 20)")  # before any trigger
    if source.engine == "postgresql":  # wider, but the same portable type: nothing to ship
        source.execute("ALTER TABLE orders ALTER COLUMN qty TYPE BIGINT")
    sync(["items", "orders"])
    source.execute("UPDATE orders SET qty = 11 WHERE id = 1")
    source.execute("DELETE FROM items WHERE id = 2")
    sync(["items", "orders"])


@pytest.mark.parametrize("pipeline", ["sqlite", "postgresql"], indirect=True)
def test_schema_changes_reach_every_destination_in_order(pipeline: Pipeline) -> None:
    evolve_source(pipeline.source, pipeline.sync)
    for dest in pipeline.dests:
        dest.forget_schema()
        assert dest.table_columns("items")["stock"] == "real"
        assert {row["id"]: row["stock"] for row in dest.rows("items")} == {1: 7, 3: 7, 4: 2.5}
    shipped = pipeline.records()
    schema_tables = [schema_key_table(record.key or b"") for record in shipped]
    # items at the start and after each stage that changed it (ADD note and DROP active
    # were captured together: one schema, the net of both); orders once.
    assert [table for table in schema_tables if table] == ["items"] * 4 + ["orders"]


def test_ddl_while_a_batch_is_read_reaches_the_topic_before_the_rows_read_under_it(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = pipeline.source
    source.execute("INSERT INTO items (id, name) VALUES (1, 'a')")
    read_changes = triggers.read_changes
    altered: list[bool] = []

    def alter_then_read(*arguments: Any) -> list[triggers.LoggedChange]:
        if not altered:  # the application's DDL lands after the capture read the schemas
            source.execute("ALTER TABLE items ADD COLUMN stock INTEGER DEFAULT 7")
            source.execute("INSERT INTO items (id, name, stock) VALUES (2, 'b', 3)")
            altered.append(True)
        return read_changes(*arguments)

    monkeypatch.setattr(triggers, "read_changes", alter_then_read)
    pipeline.sync(["items"])
    assert altered


def test_a_table_rebuilt_without_its_triggers_stops_the_capture(pipeline: Pipeline) -> None:
    source = pipeline.source
    with source.transaction():
        source.execute("CREATE TABLE items_new (id INTEGER PRIMARY KEY, name TEXT)")
        source.execute("INSERT INTO items_new SELECT id, name FROM items")
        source.execute("DROP TABLE items")
        source.execute("ALTER TABLE items_new RENAME TO items")
    source.execute("INSERT INTO items (id, name) VALUES (1, 'never logged')")
    with pytest.raises(TriggersGone, match=r"capture triggers of \['items'\] are gone"):
        run_capture(pipeline.source_url, ["*"], pipeline.broker.bootstrap, TOPIC, once=True)


def test_a_destination_bootstrapped_from_t_full_gets_the_latest_schema(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    source = pipeline.source
    source.execute("INSERT INTO items (id, name, active) VALUES (1, 'a', TRUE), (2, 'b', TRUE)")
    pipeline.sync(["items"])
    source.execute("ALTER TABLE items ADD COLUMN stock INTEGER DEFAULT 7")
    source.execute("UPDATE items SET stock = 1 WHERE id = 2")
    pipeline.sync(["items"])
    source.execute("ALTER TABLE items DROP COLUMN active")
    source.execute("INSERT INTO items (id, name) VALUES (3, 'c')")
    pipeline.sync(["items"])
    end = topic_end_offset(pipeline.broker.bootstrap, TOPIC)
    full = TOPIC + ".full"
    wait_until(lambda: topic_end_offset(pipeline.broker.bootstrap, full) >= end, 60, "T.full")
    late_url = f"sqlite:///{tmp_path}/late.db"
    late = open_database(late_url)
    try:
        ensure_state_table(late)
        apply_batch(late, pipeline.records(full), sleep=no_sleep)
    finally:
        late.close()
    assert compare_tables(pipeline.source_url, late_url, ["items"]) == []


def test_a_narrowing_stops_the_apply_until_the_operator_fixes_the_destination(
    pipeline: Pipeline,
) -> None:
    source = pipeline.source
    source.execute("ALTER TABLE items DROP COLUMN active")
    source.execute("ALTER TABLE items ADD COLUMN stock REAL")
    source.execute("INSERT INTO items (id, name, stock) VALUES (1, 'a', 2.0)")
    pipeline.sync(["items"])
    with source.transaction():  # the source narrows stock to an integer
        source.execute(
            "CREATE TABLE items_new (id INTEGER PRIMARY KEY, name TEXT, price NUMERIC, "
            "stock INTEGER)"
        )
        source.execute("INSERT INTO items_new SELECT * FROM items")
        source.execute("DROP TABLE items")
        source.execute("ALTER TABLE items_new RENAME TO items")
        triggers.install_capture(source, ["items"])
    source.execute("INSERT INTO items (id, name, stock) VALUES (2, 'b', 3)")
    run_capture(pipeline.source_url, ["*"], pipeline.broker.bootstrap, TOPIC, once=True)
    records = pipeline.records()
    for dest in pipeline.dests:
        with pytest.raises(ApplyError, match="table 'items' column 'stock'"):
            apply_batch(dest, records, max_retries=0, sleep=no_sleep)
        assert [row["id"] for row in dest.rows("items")] == [1]
        source.forget_schema()
        with dest.transaction():  # the operator's fix
            change_column_types(dest, TableSchema("items", source.table_columns("items"), ("id",)))
        apply_batch(dest, records, max_retries=0, sleep=no_sleep)
    for url in pipeline.dest_urls:
        assert compare_tables(pipeline.source_url, url, ["items"]) == []
