"""A Debezium-captured PostgreSQL applied to SQLite, DuckDB and PostgreSQL by the apply job's
exactly-once sink (``--format debezium``), and ``verify`` proving each equal to the source.

Kafka Connect with Debezium's PostgreSQL connector captures two tables (numeric, date,
timestamp, boolean, bytea, double and text columns) into the broker while random inserts,
updates and deletes run at the source, several per transaction. The broker is kshim and
then, with the same assertions, Apache Kafka (conftest.py's ``connect_broker``), except for
what reads kshim's full-data views ``T.full``, which Kafka has not. Then:

- without Spark: the topics' records, read back as the connector wrote them, go through the
  sink into the three engines; on kshim, a fourth destination is bootstrapped from the
  topics' ``T.full`` views;
- on Spark (skipped without Java or ``python -m kshim.jvm fetch spark``): the apply
  job itself, ``--once`` runs in the middle of the activity and after it, into the three
  engines, and on kshim a bootstrap from ``T.full``.

Skipped with the reason without Java, the Connect jars or PostgreSQL; the Kafka runs
without the Kafka jars.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.connect.postgres_connector import postgres_connector_config
from kshim.testing import BrokerProcess
from spark_examples.verify import compare_tables
from tests.connect.connect_helpers import (
    ConnectWorker,
    apply_once,
    apply_topics,
    connect_unavailable_reason,
    is_kafka,
    operations,
    read_events,
)
from tests.connect.source_changes import SOURCE_SCHEMA, TABLES, CapturedSource
from tests.sync.spark_marks import UNAVAILABLE as SPARK_UNAVAILABLE

UNAVAILABLE = connect_unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]

PREFIX = "inventory"
TOPICS = [f"{PREFIX}.public.{table}" for table in TABLES]
VIEWS = [f"{topic}.full" for topic in TOPICS]
KEYS = 40  # rows 1..40 of each table change at random; row 0 carries the markers
BATCH = 100
APPLY_TIMEOUT_S = 180
CAPTURE_TIMEOUT_S = 120
_databases = itertools.count(1)


@pytest.fixture(scope="module")
def source(
    source_database: str, connect_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CapturedSource]:
    """The source database, captured by a running connector from its first row on."""
    source = CapturedSource(source_database, connect_broker.bootstrap, TOPICS, KEYS)
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
    name = f"kshim_dest_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(base + "postgres", autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return base + name


def destinations(tmp_path: Path, source_url: str) -> list[str]:
    return [
        f"sqlite:///{tmp_path}/dest.db",
        f"duckdb:///{tmp_path}/dest.duckdb",
        another_database(source_url),
    ]


def test_debezium_topics_through_the_sink_into_each_engine(
    source: CapturedSource, tmp_path: Path
) -> None:
    source.random_changes(400, seed=5)
    source.wait_until_captured(CAPTURE_TIMEOUT_S)
    ops = {op for op, _ in operations(read_events(source.bootstrap, TOPICS[0]))}
    assert {"r", "c", "u", "d", "tombstone"} <= ops
    for dest in destinations(tmp_path, source.url):
        apply_topics(dest, source.bootstrap, TOPICS)
        assert compare_tables(source.url, dest, TABLES) == [], dest


@pytest.mark.kshim_only  # Apache Kafka has no full-data views (T.full)
def test_a_destination_bootstrapped_from_the_full_views(
    source: CapturedSource, connect_broker: BrokerProcess, tmp_path: Path
) -> None:
    source.wait_until_captured(CAPTURE_TIMEOUT_S)
    bootstrapped = f"sqlite:///{tmp_path}/from-views.db"
    apply_topics(bootstrapped, source.bootstrap, VIEWS)
    assert compare_tables(source.url, bootstrapped, TABLES) == []


@pytest.mark.spark
@pytest.mark.skipif(SPARK_UNAVAILABLE is not None, reason=SPARK_UNAVAILABLE or "")
def test_the_spark_apply_job_on_debezium_topics(
    source: CapturedSource, connect_broker: BrokerProcess, tmp_path: Path
) -> None:
    from spark_examples.spark_session import kafka_spark_session

    spark = kafka_spark_session("kshim-debezium-apply")
    try:
        targets = [(dest, TOPICS) for dest in destinations(tmp_path, source.url)]
        if not is_kafka(connect_broker):  # T.full is kshim's
            targets.append((f"sqlite:///{tmp_path}/from-views.db", VIEWS))
        source.random_changes(200, seed=7)
        source.wait_until_captured(CAPTURE_TIMEOUT_S)
        for number, (dest, topics) in enumerate(targets):
            apply_once(spark, source.bootstrap, topics, dest, tmp_path / f"checkpoint-{number}")
        source.random_changes(200, seed=8)
        source.wait_until_captured(CAPTURE_TIMEOUT_S)
        for number, (dest, topics) in enumerate(targets):
            apply_once(spark, source.bootstrap, topics, dest, tmp_path / f"checkpoint-{number}")
            assert compare_tables(source.url, dest, TABLES) == [], dest
    finally:
        spark.stop()
