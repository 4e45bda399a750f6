"""Kafka Connect workers as child processes, and Debezium's change events read back from the
broker (kshim or Apache Kafka).

A worker is ``python -m examples.connect.run_connect``, which execs the JVM: the process this
module starts is the worker itself, so ``kill`` is a kill -9 of the worker. Every wait is
bounded; only processes started here are signalled, by their process id.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from examples.connect.classpath import jars_unavailable_reason, worker_jars
from examples.connect.rest import ConnectRest
from examples.connect.worker import java_executable
from kshim.testing import BrokerProcess, KafkaProcess, free_port, kill_process, stop_process
from spark_examples.apply.job import ApplyOptions, apply_error_message, start_apply
from spark_examples.apply.sink import SourceRecord, apply_batch, decode_debezium, ensure_state_table
from spark_examples.databases import open_database
from spark_examples.postgres_cluster import postgres_unavailable_reason

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WORKER_START_TIMEOUT_S = 90.0
# Members of a killed worker are dropped after the session timeout (Connect's 10 s); a lost
# assignment then waits this long for its worker to come back before it moves elsewhere.
TEST_WORKER_SETTINGS = {
    "offset.flush.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "3000",
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "1000",
}
READ_TIMEOUT_S = 20.0
APPLY_BATCH = 100  # records per sink transaction, as a small micro-batch of the apply job
SPARK_APPLY_TIMEOUT_S = 180


def connect_unavailable_reason() -> str | None:
    """Why Connect with Debezium and PostgreSQL cannot run here, or None."""
    if java_executable() is None:
        return "no Java runtime (java on PATH or JAVA_HOME) for Kafka Connect"
    reason = jars_unavailable_reason()
    if reason is not None:
        return f"no Kafka Connect jars: {reason}"
    return postgres_unavailable_reason()


def is_kafka(broker: BrokerProcess) -> bool:
    """Whether ``broker`` is Apache Kafka rather than kshim."""
    return isinstance(broker, KafkaProcess)


class ConnectWorker:
    """One distributed worker (``examples.connect.run_connect``) with its own REST port and
    work directory; the log is ``<work dir>.log``."""

    def __init__(
        self,
        work_dir: Path,
        bootstrap: str,
        group_id: str,
        exactly_once: bool = False,
        rest_port: int | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.exactly_once = exactly_once
        self.rest_port = rest_port or free_port()
        self.rest = ConnectRest(f"http://127.0.0.1:{self.rest_port}")
        self.log_path = work_dir.with_suffix(".log")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def worker_id(self) -> str:
        """How Connect names this worker in a status: its advertised host and port."""
        return f"127.0.0.1:{self.rest_port}"

    def start(self) -> ConnectWorker:
        """Starts the worker and waits until its REST API answers (then it has joined).
        Raises ClasspathError when the jars cannot be had, TimeoutError when it never
        answers."""
        worker_jars()  # a cold cache is filled before the start's clock runs
        command = [
            sys.executable, "-m", "examples.connect.run_connect",
            "--bootstrap", self.bootstrap, "--rest-port", str(self.rest_port),
            "--work-dir", str(self.work_dir), "--group-id", self.group_id,
        ]  # fmt: skip
        if self.exactly_once:
            command.append("--exactly-once")
        for key, value in TEST_WORKER_SETTINGS.items():
            command += ["--set", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            self.rest.wait_until_up(WORKER_START_TIMEOUT_S)
        except TimeoutError:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        """kill -9 of the worker: no shutdown, no offset flush, an open transaction left."""
        kill_process(self.process)
        self.process = None

    def is_running(self) -> bool:
        """Whether the worker's process was started and has not exited."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM (Connect's orderly shutdown), SIGKILL if it lingers."""
        stop_process(self.process)
        self.process = None

    def log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        return ""


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One record of a Debezium topic: the key's and value's payloads (None: tombstone)."""

    offset: int
    key: dict[str, Any] | None
    value: dict[str, Any] | None

    @property
    def op(self) -> str:
        """c, u, d, r, or "tombstone"."""
        return "tombstone" if self.value is None else str(self.value["op"])

    @property
    def row(self) -> dict[str, Any] | None:
        """The row after the change (None for a delete and a tombstone)."""
        return None if self.value is None else self.value.get("after")

    @property
    def lsn(self) -> int | None:
        return None if self.value is None else self.value["source"].get("lsn")

    @property
    def identity(self) -> tuple[str, str, int | None]:
        """What makes a change unique at the source: its key, its operation and its LSN (a
        replayed change after an at-least-once restart repeats all three)."""
        return json.dumps(self.key, sort_keys=True), self.op, self.lsn

    def describe(self) -> str:
        return f"{self.offset}:{self.op}:{self.key}:{self.row}"


def _payload(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    document: dict[str, Any] = json.loads(data)
    # JsonConverter with schemas.enable=true wraps each key and value in {schema, payload}.
    return document["payload"] if set(document) == {"schema", "payload"} else document


def read_events(
    bootstrap: str, topic: str, isolation: str = "read_uncommitted", start: int = 0
) -> list[ChangeEvent]:
    """Every record of partition 0 of ``topic`` from ``start`` up to its end now (the last
    stable offset for read_committed), in offset order."""
    return [
        ChangeEvent(offset, _payload(key), _payload(value))
        for offset, key, value in _read_to_end(bootstrap, topic, isolation, start)
    ]


def _read_to_end(
    bootstrap: str, topic: str, isolation: str, start: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of partition 0 of ``topic`` from ``start`` up to its end now."""
    from confluent_kafka import OFFSET_END, Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "kshim-connect-test",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": isolation, "fetch.wait.max.ms": 100,
    })  # fmt: skip
    records: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if high <= start:
            return records
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return records
                raise RuntimeError(f"reading {topic}: {error}")
            offset = message.offset()
            assert offset is not None and offset != OFFSET_END
            records.append((offset, message.key(), message.value()))
        raise TimeoutError(f"no end of {topic} after {READ_TIMEOUT_S} s")
    finally:
        consumer.close()


def topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return topic in metadata.topics and metadata.topics[topic].error is None


def wait_for_events(
    bootstrap: str,
    topic: str,
    condition: Callable[[list[ChangeEvent]], bool],
    timeout_s: float,
    isolation: str = "read_uncommitted",
    start: int = 0,
) -> list[ChangeEvent]:
    """Reads ``topic`` again and again until ``condition`` holds for its events; returns
    them. Raises TimeoutError with the last events read."""
    deadline = time.monotonic() + timeout_s
    events: list[ChangeEvent] = []
    while True:
        if topic_exists(bootstrap, topic):
            events = read_events(bootstrap, topic, isolation, start)
            if condition(events):
                return events
        if time.monotonic() > deadline:
            seen = "; ".join(event.describe() for event in events[-10:])
            raise TimeoutError(f"{topic}: condition not met after {timeout_s} s: {seen}")
        time.sleep(0.5)


def operations(events: Sequence[ChangeEvent]) -> list[tuple[str, Any]]:
    """(op, id of the row) per event: the key's ``id`` column."""
    return [(event.op, None if event.key is None else event.key.get("id")) for event in events]


def first_occurrences(events: Sequence[ChangeEvent]) -> list[ChangeEvent]:
    """Events without the replays of an at-least-once restart: a change repeats its key, op
    and LSN; a tombstone counts as its delete's (it has no LSN of its own)."""
    seen: set[tuple[str, str, int | None]] = set()
    kept = []
    last_lsn: int | None = None
    for event in events:
        key, op, lsn = event.identity
        if event.value is None:
            lsn = last_lsn
        else:
            last_lsn = lsn
        if (key, op, lsn) not in seen:
            seen.add((key, op, lsn))
            kept.append(event)
    return kept


def read_records(bootstrap: str, topic: str) -> list[SourceRecord]:
    """Every committed record of partition 0 of ``topic`` up to its end now, as the apply
    job's sink takes them (raw key and value bytes)."""
    return [
        SourceRecord(topic, 0, offset, key, value)
        for offset, key, value in _read_to_end(bootstrap, topic, "read_committed", 0)
    ]


def apply_topics(dest: str, bootstrap: str, topics: Sequence[str]) -> None:
    """Every committed record of ``topics`` through the apply job's exactly-once sink
    (Debezium's format) into the database at ``dest``, in batches, as the job would."""
    database = open_database(dest)
    try:
        ensure_state_table(database)
        for topic in topics:
            records = read_records(bootstrap, topic)
            for start in range(0, len(records), APPLY_BATCH):
                batch = records[start : start + APPLY_BATCH]
                apply_batch(database, batch, decoder=decode_debezium)
    finally:
        database.close()


def apply_once(
    spark: SparkSession, bootstrap: str, topics: Sequence[str], dest: str, checkpoint: Path
) -> None:
    """One ``--once --format debezium`` run of the Spark apply job over ``topics``; fails
    the test when it does not finish in time or a record cannot be applied."""
    options = ApplyOptions(
        bootstrap, ",".join(topics), dest, str(checkpoint), once=True, record_format="debezium"
    )
    query = start_apply(spark, options)
    try:
        finished = query.awaitTermination(SPARK_APPLY_TIMEOUT_S)
    except Exception:  # the query failed: its message is read below
        finished = True
    if not finished:
        query.stop()
        pytest.fail(f"apply of {topics} into {dest} did not finish in {SPARK_APPLY_TIMEOUT_S} s")
    message = apply_error_message(query)
    assert message is None, message[-3000:]
