"""A Debezium-captured PostgreSQL applied to SQLite, DuckDB and PostgreSQL by the apply job's
exactly-once sink (``--format debezium``), and ``verify`` proving each equal to the source.

Kafka Connect with Debezium's PostgreSQL connector captures two tables (numeric, date,
timestamp, boolean, bytea, double and text columns) into kshim while random inserts,
updates and deletes run at the source, several per transaction. Then:

- without Spark: the topics' records, read back as the connector wrote them, go through the
  sink into the three engines, and a fourth destination is bootstrapped from the topics'
  full-data views ``T.full``;
- on Spark (skipped without the Kafka connector's jars, ``KSHIM_SPARK_JARS``): the apply
  job itself, ``--once`` runs in the middle of the activity and after it, into the three
  engines, and a bootstrap from ``T.full``.

Skipped with the reason without Java, the Connect jars or PostgreSQL.
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from examples.connect.postgres_connector import postgres_connector_config
from kshim.testing import BrokerProcess
from spark_examples.verify import compare_tables
from tests.connect.connect_helpers import (
    ChangeEvent,
    ConnectWorker,
    apply_once,
    apply_topics,
    connect_unavailable_reason,
    operations,
    read_events,
    wait_for_events,
)
from tests.sync.spark_marks import UNAVAILABLE as SPARK_UNAVAILABLE

if TYPE_CHECKING:
    pass

UNAVAILABLE = connect_unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]

PREFIX = "inventory"
TABLES = ["customers", "orders"]
TOPICS = [f"{PREFIX}.public.{table}" for table in TABLES]
VIEWS = [f"{topic}.full" for topic in TOPICS]
KEYS = 40  # rows 1..40 of each table change at random; row 0 carries the markers
BATCH = 100
APPLY_TIMEOUT_S = 180
SOURCE_SCHEMA = (
    "CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL,"
    " balance numeric(12,2), born date, seen timestamp, active boolean, photo bytea,"
    " score double precision)",
    "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, amount numeric(12,2),"
    " note text)",
    "INSERT INTO customers (id, name) VALUES (0, 'marker 0')",
    "INSERT INTO orders (id, note) VALUES (0, 'marker 0')",
    "INSERT INTO customers SELECT i, 'customer ' || i, i * 1.25, DATE '2000-01-01' + i,"
    " TIMESTAMP '2020-01-01 10:00:00.123456' + i * INTERVAL '1 hour', i % 2 = 0,"
    " decode(lpad(to_hex(i), 4, '0'), 'hex'), i / 3.0 FROM generate_series(1, 10) AS i",
)
_markers = itertools.count(1)


class Source:
    """The captured database: random changes, and markers that say when all is captured."""

    def __init__(self, url: str, bootstrap: str) -> None:
        self.url = url
        self.bootstrap = bootstrap

    def execute(self, transactions: list[list[tuple[str, tuple[object, ...]]]]) -> None:
        import psycopg

        with psycopg.connect(self.url) as connection:
            for statements in transactions:
                with connection.transaction():
                    for statement, parameters in statements:
                        connection.execute(statement, parameters or None)

    def random_changes(self, count: int, seed: int) -> None:
        """About ``count`` inserts, updates and deletes, one to five per transaction."""
        generator = random.Random(seed)
        transactions = []
        while count > 0:
            size = min(count, generator.randint(1, 5))
            transactions.append([_random_statement(generator) for _ in range(size)])
            count -= size
        self.execute(transactions)

    def wait_until_captured(self) -> None:
        """Changes row 0 of both tables and waits until both changes are in their topics:
        the connector reads the source's log in commit order, so all before are there too."""
        marker = f"marker {next(_markers)}"
        self.execute([[
            ("UPDATE customers SET name = %s WHERE id = 0", (marker,)),
            ("UPDATE orders SET note = %s WHERE id = 0", (marker,)),
        ]])  # fmt: skip
        for topic, column in zip(TOPICS, ("name", "note"), strict=True):
            wait_for_events(self.bootstrap, topic, _marked(column, marker), 120)


def _marked(column: str, marker: str) -> Callable[[list[ChangeEvent]], bool]:
    def marked(events: list[ChangeEvent]) -> bool:
        return any(
            event.row is not None and event.row.get("id") == 0 and event.row.get(column) == marker
            for event in events
        )

    return marked


def _random_statement(generator: random.Random) -> tuple[str, tuple[object, ...]]:
    identity = generator.randint(1, KEYS)
    if generator.random() < 0.25:
        table = generator.choice(TABLES)
        return f"DELETE FROM {table} WHERE id = %s", (identity,)
    if generator.random() < 0.5:
        note = None if generator.random() < 0.2 else f"note {generator.random():.5f} é✓"
        amount = f"{generator.randint(-(10**6), 10**6) / 100:.2f}"
        return (
            "INSERT INTO orders VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
            " customer_id = excluded.customer_id, amount = excluded.amount, note = excluded.note",
            (identity, generator.randint(1, KEYS), amount, note),
        )
    row = (
        identity,
        f"customer {generator.random():.6f}",
        None if generator.random() < 0.2 else f"{generator.randint(-(10**8), 10**8) / 100:.2f}",
        datetime.date(2000, 1, 1) + datetime.timedelta(days=generator.randint(-20000, 20000)),
        f"2024-05-06 07:08:09.{generator.randint(0, 999999):06d}",
        generator.choice([True, False, None]),
        None if generator.random() < 0.3 else generator.randbytes(generator.randint(0, 12)),
        None if generator.random() < 0.2 else generator.uniform(-1e6, 1e6),
    )
    return (
        "INSERT INTO customers VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO"
        " UPDATE SET name = excluded.name, balance = excluded.balance, born = excluded.born,"
        " seen = excluded.seen, active = excluded.active, photo = excluded.photo,"
        " score = excluded.score",
        row,
    )


@pytest.fixture(scope="module")
def source(
    source_database: str, connect_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Source]:
    """The source database, captured by a running connector from its first row on."""
    source = Source(source_database, connect_broker.bootstrap)
    source.execute([[(statement, ()) for statement in SOURCE_SCHEMA]])
    work_dir = tmp_path_factory.mktemp("pipeline-connect") / "worker"
    worker = ConnectWorker(work_dir, connect_broker.bootstrap, "kshim-pipeline").start()
    try:
        tables = [f"public.{table}" for table in TABLES]
        config = postgres_connector_config(
            source_database, PREFIX, tables, slot="pipeline_slot", publication="pipeline_pub"
        )
        worker.rest.put_connector("pipeline", config)
        worker.rest.wait_until_running("pipeline", tasks=1, timeout_s=120)
        yield source
    finally:
        worker.stop()


def another_database(source_url: str) -> str:
    """A fresh PostgreSQL destination on the source's cluster."""
    import psycopg

    base = source_url.rsplit("/", 1)[0] + "/"
    name = f"kshim_dest_{os.getpid()}_{next(_markers)}"
    with psycopg.connect(base + "postgres", autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return base + name


def destinations(tmp_path: Path, source_url: str) -> list[str]:
    return [
        f"sqlite:///{tmp_path}/dest.db",
        f"duckdb:///{tmp_path}/dest.duckdb",
        another_database(source_url),
    ]


def test_debezium_topics_through_the_sink_into_each_engine(source: Source, tmp_path: Path) -> None:
    source.random_changes(400, seed=5)
    source.wait_until_captured()
    ops = {op for op, _ in operations(read_events(source.bootstrap, TOPICS[0]))}
    assert {"r", "c", "u", "d", "tombstone"} <= ops
    for dest in destinations(tmp_path, source.url):
        apply_topics(dest, source.bootstrap, TOPICS)
        assert compare_tables(source.url, dest, TABLES) == [], dest
    bootstrapped = f"sqlite:///{tmp_path}/from-views.db"
    apply_topics(bootstrapped, source.bootstrap, VIEWS)
    assert compare_tables(source.url, bootstrapped, TABLES) == []


@pytest.mark.spark
@pytest.mark.skipif(SPARK_UNAVAILABLE is not None, reason=SPARK_UNAVAILABLE or "")
def test_the_spark_apply_job_on_debezium_topics(source: Source, tmp_path: Path) -> None:
    from spark_examples.spark_session import kafka_spark_session

    spark = kafka_spark_session("kshim-debezium-apply")
    try:
        targets = [(dest, TOPICS) for dest in destinations(tmp_path, source.url)]
        targets.append((f"sqlite:///{tmp_path}/from-views.db", VIEWS))
        source.random_changes(200, seed=7)
        source.wait_until_captured()
        for number, (dest, topics) in enumerate(targets):
            apply_once(spark, source.bootstrap, topics, dest, tmp_path / f"checkpoint-{number}")
        source.random_changes(200, seed=8)
        source.wait_until_captured()
        for number, (dest, topics) in enumerate(targets):
            apply_once(spark, source.bootstrap, topics, dest, tmp_path / f"checkpoint-{number}")
            assert compare_tables(source.url, dest, TABLES) == [], dest
    finally:
        spark.stop()
