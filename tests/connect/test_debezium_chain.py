"""The whole chain through crashes: Kafka Connect distributed with Debezium's PostgreSQL
connector and ``exactly.once.source.support=enabled`` -> the broker -> the apply job's
exactly-once sink -> SQLite and DuckDB, ending with ``verify`` equal to the source. The
broker is kshim and then, with the same assertions, Apache Kafka (conftest.py's
``connect_broker``): the reference for what a crash of either side may cost.

The tests run in order on one source database, one broker and one worker:

1. the snapshot of the existing rows (``op: r``), then random changes, one to five per
   source transaction;
2. kill -9 of the worker while changes stream, changes while it is down, a restart: the
   task's open transaction is aborted, and it resumes from the offsets it committed with
   its records;
3. kill -9 of the broker (``BrokerProcess.kill``), changes at the source while it is down,
   a restart on the same data directory and port: the worker and its producers reconnect
   on their own;
4. more changes, deletes among them (each followed by a tombstone); every committed record
   through the sink (no Spark needed) into SQLite and DuckDB, and ``verify`` equal; kshim's
   log shows no failure of its own (on kshim only: Kafka's log is the reference's, not
   what is under test, and its markers are not kshim's);
5. a read_committed reader sees every source change exactly once, in the source's order per
   row: compared with an audit log that triggers keep at the source (not captured);
6. on Spark (skipped without Java or ``python -m kshim.jvm fetch spark``), the apply job
   itself into both engines.

Skipped with the reason without Java, the Connect jars or PostgreSQL; the Kafka runs
without the Kafka jars.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from examples.connect.postgres_connector import postgres_connector_config
from examples.connect.rest import ConnectRestError, wait_for
from kshim.testing import BrokerProcess, failure_lines
from spark_examples.testing import topic_end_offset
from spark_examples.verify import compare_tables
from tests.connect import source_changes
from tests.connect.connect_helpers import (
    ChangeEvent,
    ConnectWorker,
    apply_once,
    apply_topics,
    connect_unavailable_reason,
    is_kafka,
    read_events,
)
from tests.connect.source_changes import TABLES, CapturedSource, Statement
from tests.sync.spark_marks import UNAVAILABLE as SPARK_UNAVAILABLE

UNAVAILABLE = connect_unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]

GROUP_ID = "kshim-chain"
CONNECTOR = "chain"
PREFIX = "chain"
TOPICS = [f"{PREFIX}.public.{table}" for table in TABLES]
KEYS = 30  # rows 1..30 of each table change at random; row 0 carries the markers
RUNNING_TIMEOUT_S = 120.0
CAPTURE_TIMEOUT_S = 90.0
# After the broker's restart: the worker's clients back off and reconnect, its group rejoins
# and the task's transactional producer carries on; generous on a loaded 2-core machine.
RECOVERY_TIMEOUT_S = 120.0
STREAM_PACE_S = 0.05  # between source transactions of a stream: changes keep coming
# The task's producer commits a transaction every 2 s (KIP-618's "interval" boundary): long
# enough that each kill below finds one open, with records in the log that a read_committed
# reader does not get yet.
EXACTLY_ONCE = {
    "exactly.once.support": "required",
    "transaction.boundary": "interval",
    "transaction.boundary.interval.ms": "2000",
}
BROKER_DOWN_S = 5.0  # how long changes go on at the source with no broker

# The orders of rows 1 to 5 are in the snapshot too.
SOURCE_SCHEMA = (
    *source_changes.SOURCE_SCHEMA,
    "INSERT INTO orders SELECT i, i, i * 10, 'order ' || i FROM generate_series(1, 5) AS i",
)
# Every change after the snapshot, logged at the source in its order per row (a row's
# changes are serialised by its lock); change_log is not in the connector's publication.
AUDIT = (
    "CREATE TABLE change_log (seq bigserial PRIMARY KEY, table_name text NOT NULL,"
    " id integer NOT NULL, op text NOT NULL)",
    "CREATE FUNCTION log_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " IF TG_OP = 'DELETE' THEN"
    "  INSERT INTO change_log (table_name, id, op) VALUES (TG_TABLE_NAME, OLD.id, 'd');"
    " ELSE"
    "  INSERT INTO change_log (table_name, id, op) VALUES (TG_TABLE_NAME, NEW.id,"
    "   CASE TG_OP WHEN 'INSERT' THEN 'c' ELSE 'u' END);"
    " END IF; RETURN NULL; END $$",
    *(
        f"CREATE TRIGGER {table}_log AFTER INSERT OR UPDATE OR DELETE ON {table}"
        " FOR EACH ROW EXECUTE FUNCTION log_change()"
        for table in TABLES
    ),
)


@dataclass
class Chain:
    """The module's source, broker and worker, and what the tests had to do to them."""

    source_url: str
    broker: BrokerProcess
    worker: ConnectWorker
    snapshot_rows: dict[str, list[int]] = field(default_factory=dict)
    worker_restarts_after_outage: int = 0

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def source(self) -> CapturedSource:
        return CapturedSource(self.source_url, self.bootstrap, TOPICS, KEYS)

    def execute(self, transactions: list[list[Statement]], pace_s: float = 0.0) -> None:
        self.source.execute(transactions, pace_s)

    def random_changes(self, count: int, seed: int, pace_s: float = 0.0) -> None:
        self.source.random_changes(count, seed, pace_s)

    def wait_until_captured(self, timeout_s: float = CAPTURE_TIMEOUT_S) -> None:
        """Until a read_committed reader has every change made so far."""
        self.source.wait_until_captured(timeout_s, "read_committed")

    def topics_end(self) -> list[int]:
        """The end of each topic (committed, aborted and open records alike)."""
        return [topic_end_offset(self.bootstrap, topic) for topic in TOPICS]

    def open_records(self, starts: list[int]) -> int:
        """Records from ``starts`` on that a read_committed reader does not get (yet)."""
        return sum(
            len(read_events(self.bootstrap, topic, "read_uncommitted", start))
            - len(read_events(self.bootstrap, topic, "read_committed", start))
            for topic, start in zip(TOPICS, starts, strict=True)
        )

    def wait_for_open_transaction(self, starts: list[int]) -> None:
        wait_for(lambda: self.open_records(starts) > 0, CAPTURE_TIMEOUT_S, "an open transaction")

    def worker_errors(self, lines: int = 15) -> str:
        """The worker log's last ERROR and WARN lines: why a task stopped."""
        found = [
            line
            for line in self.worker.log_text().splitlines()
            if line.startswith("[") and (" ERROR " in line or " WARN " in line)
        ]
        return "\n".join(found[-lines:])


class Stream:
    """Random changes at the source in a thread of their own, paced: a stream to crash into.
    ``join`` re-raises what the thread raised."""

    def __init__(self, chain: Chain, count: int, seed: int) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(chain, count, seed), daemon=True)
        self.thread.start()

    def _run(self, chain: Chain, count: int, seed: int) -> None:
        try:
            chain.random_changes(count, seed, STREAM_PACE_S)
        except BaseException as error:  # handed to the test's thread by join
            self.error = error

    def join(self, timeout_s: float = 60.0) -> None:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"the source's changes not done in {timeout_s} s"
        if self.error is not None:
            raise self.error


@pytest.fixture(scope="module")
def chain(
    source_database: str, connect_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Chain]:
    """The source with its rows and audit triggers, an exactly-once worker, the connector
    registered with ``exactly.once.support=required``."""
    work_dir = tmp_path_factory.mktemp("chain-connect") / "worker"
    worker = ConnectWorker(work_dir, connect_broker.bootstrap, GROUP_ID, exactly_once=True)
    chain = Chain(source_database, connect_broker, worker)
    chain.execute([[(statement, ()) for statement in (*SOURCE_SCHEMA, *AUDIT)]])
    chain.snapshot_rows = {table: _source_ids(source_database, table) for table in TABLES}
    try:
        worker.start()
        tables = [f"public.{table}" for table in TABLES]
        config = postgres_connector_config(
            source_database, PREFIX, tables, "chain_slot", "chain_pub", overrides=EXACTLY_ONCE
        )
        worker.rest.put_connector(CONNECTOR, config)
        worker.rest.wait_until_running(CONNECTOR, tasks=1, timeout_s=RUNNING_TIMEOUT_S)
        yield chain
    finally:
        chain.worker.stop()


def _source_ids(url: str, table: str) -> list[int]:
    import psycopg

    with psycopg.connect(url) as connection:
        return [row[0] for row in connection.execute(f"SELECT id FROM {table} ORDER BY id")]


def test_snapshot_then_changes(chain: Chain) -> None:
    chain.wait_until_captured()
    for table, topic in zip(TABLES, TOPICS, strict=True):
        snapshot = read_events(chain.bootstrap, topic, "read_committed")
        rows = chain.snapshot_rows[table]
        assert [(e.op, _key_id(e)) for e in snapshot[: len(rows)]] == [("r", i) for i in rows]
    chain.random_changes(150, seed=1)
    chain.wait_until_captured()


def test_worker_killed_mid_stream_then_restarted(chain: Chain) -> None:
    stream = Stream(chain, 300, seed=2)
    kill_worker_with_a_transaction_open(chain, chain.topics_end())
    assert stream.thread.is_alive(), "the stream ended before the kill: make it longer"
    stream.join()
    chain.random_changes(100, seed=3)  # while the worker is down
    chain.worker.start()
    chain.worker.rest.wait_until_running(CONNECTOR, tasks=1, timeout_s=RUNNING_TIMEOUT_S)
    chain.wait_until_captured()


def kill_worker_with_a_transaction_open(chain: Chain, starts: list[int]) -> None:
    """kill -9 of the worker while its task's transaction has records in the log: they stay
    open until the restarted task aborts them. Seen open, the worker (the JVM itself:
    run_connect execs java) is stopped (SIGSTOP) and the log read again, so that a commit
    landing between the look and the kill cannot leave nothing open; if it committed, the
    worker goes on (SIGCONT) and the next transaction is waited for."""
    deadline = time.monotonic() + CAPTURE_TIMEOUT_S
    while True:
        chain.wait_for_open_transaction(starts)
        assert chain.worker.process is not None
        chain.worker.process.send_signal(signal.SIGSTOP)
        if chain.open_records(starts) > 0:
            chain.worker.kill()
            return
        chain.worker.process.send_signal(signal.SIGCONT)
        assert time.monotonic() < deadline, "no transaction seen open with the worker stopped"


def test_broker_killed_then_restarted_on_its_data(chain: Chain) -> None:
    broker = chain.broker
    stream = Stream(chain, 200, seed=4)  # the changes go on while the broker is down
    chain.wait_for_open_transaction(chain.topics_end())
    broker.kill()  # with a transaction open: its records are in the log, its end is not
    outage_started = time.monotonic()
    assert stream.thread.is_alive(), "the stream ended before the kill: make it longer"
    stream.join()
    # An outage of a given length is the scenario itself: no event to wait for instead.
    time.sleep(max(0.0, BROKER_DOWN_S - (time.monotonic() - outage_started)))
    broker.start()  # the same data directory and port: clients keep their bootstrap
    restarted = time.monotonic()
    _wait_until_connect_recovers(chain)
    chain.wait_until_captured(RECOVERY_TIMEOUT_S)
    print(
        f"broker down {restarted - outage_started:.1f} s, capturing again"
        f" {time.monotonic() - restarted:.1f} s after its restart;"
        f" worker restarts needed: {chain.worker_restarts_after_outage}"
    )


def _wait_until_connect_recovers(chain: Chain) -> None:
    """Waits, bounded, until the connector and its task run again after the broker's
    restart. A worker that exited meanwhile is started again, as an operator would (Connect
    gives up, for example, when the broker stays away longer than its clients' timeouts);
    a FAILED task is not restarted: that is a failure of the chain, reported with the log."""
    worker = chain.worker

    def running() -> bool:
        if not worker.is_running():
            chain.worker_restarts_after_outage += 1
            worker.start()
        try:
            status = worker.rest.status(CONNECTOR)
        except (ConnectRestError, OSError):
            return False
        states = [status["connector"]["state"], *(task["state"] for task in status["tasks"])]
        assert "FAILED" not in states, f"after the broker's restart: {status}\n" + (
            chain.worker_errors()
        )
        return states == ["RUNNING", "RUNNING"]

    wait_for(running, RECOVERY_TIMEOUT_S, "connector running again", chain.worker_errors)


def test_more_changes_then_apply_and_verify(chain: Chain, tmp_path: Path) -> None:
    chain.random_changes(150, seed=6)
    chain.execute([
        [("DELETE FROM customers WHERE id IN (SELECT id FROM customers WHERE id > 0"
          " ORDER BY id LIMIT 3)", ())],
        [("DELETE FROM orders WHERE id > 0 AND id % 4 = 0", ())],
    ])  # fmt: skip
    chain.wait_until_captured()
    for dest in (f"sqlite:///{tmp_path}/dest.db", f"duckdb:///{tmp_path}/dest.duckdb"):
        apply_topics(dest, chain.bootstrap, TOPICS)
        assert compare_tables(chain.source_url, dest, TABLES) == [], dest
    # Both lives of kshim, the killed one and the restarted one, logged no failure.
    if not is_kafka(chain.broker):
        assert failure_lines(chain.broker.log_text()) == [], chain.broker.log_tail()


def test_read_committed_sees_each_change_once_in_order(chain: Chain) -> None:
    expected = _audited_operations(chain)
    aborted = 0
    for table, topic in zip(TABLES, TOPICS, strict=True):
        events = read_events(chain.bootstrap, topic, "read_committed")
        seen: dict[int, list[str]] = {}
        for event in events:
            seen.setdefault(_key_id(event), []).append(event.op)
        wrong = {
            row: (expected[table].get(row), seen.get(row))
            for row in sorted(expected[table].keys() | seen.keys())
            if expected[table].get(row) != seen.get(row)
        }
        assert wrong == {}, f"{topic}: operations per row (source, read_committed): {wrong}"
        every = len(read_events(chain.bootstrap, topic, "read_uncommitted"))
        aborted += every - len(events)
        print(f"{topic}: {len(events)} committed, {every - len(events)} aborted record(s)")
    assert aborted > 0, "the killed worker's open transaction left no records"


def _audited_operations(chain: Chain) -> dict[str, dict[int, list[str]]]:
    """Per table and row, the operations a reader must see: ``r`` for a row of the
    snapshot, then every change the audit log holds, a delete followed by its tombstone."""
    import psycopg

    expected: dict[str, dict[int, list[str]]] = {
        table: {row: ["r"] for row in rows} for table, rows in chain.snapshot_rows.items()
    }
    with psycopg.connect(chain.source_url) as connection:
        logged = connection.execute("SELECT table_name, id, op FROM change_log ORDER BY seq")
        for table, row, op in logged:
            operations = expected[table].setdefault(row, [])
            operations += [op, "tombstone"] if op == "d" else [op]
    return expected


def _key_id(event: ChangeEvent) -> int:
    assert event.key is not None, f"a record without a key at offset {event.offset}"
    return int(event.key["id"])


@pytest.mark.spark
@pytest.mark.skipif(SPARK_UNAVAILABLE is not None, reason=SPARK_UNAVAILABLE or "")
def test_the_spark_apply_job_after_the_crashes(chain: Chain, tmp_path: Path) -> None:
    from spark_examples.spark_session import kafka_spark_session

    spark = kafka_spark_session("kshim-debezium-chain")
    try:
        destinations = [f"sqlite:///{tmp_path}/dest.db", f"duckdb:///{tmp_path}/dest.duckdb"]
        for number, dest in enumerate(destinations):
            apply_once(spark, chain.bootstrap, TOPICS, dest, tmp_path / f"checkpoint-{number}")
            assert compare_tables(chain.source_url, dest, TABLES) == [], dest
    finally:
        spark.stop()
