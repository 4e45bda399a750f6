"""End to end on Spark: capture -> kshim -> Spark apply, with the VENUS consistency experiment.

Random inserts, updates and deletes run on a SQLite source while the capture child process
ships them through a kshim broker with the capture review hook, and the Spark apply job
writes a SQLite destination (``--once`` runs, as a scheduler would start it) and a DuckDB
destination (one streaming query that lives through the kills). The broker is killed with
-9 and restarted on the same port and data directory mid-stream, the capture is killed
with -9 at a random point and restarted. At the end every destination equals the source
(verify.compare_tables), the topic holds every change sequence exactly once, and each
destination's stored next offset is the end of the topic. A destination started late from
``T.full`` (bootstrap) converges too. Skipped without the connector jars.
"""

from __future__ import annotations

import functools
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from kshim.client.group_admin import GroupAdmin
from kshim.testing import BrokerProcess
from spark_examples.apply.job import ApplyOptions, apply_error_message, start_apply
from spark_examples.apply.progress import default_group
from spark_examples.apply.sink import next_offset
from spark_examples.capture.broker import ensure_topic
from spark_examples.capture.review import REVIEW_HOOK, REVIEW_HOOK_SETTING
from spark_examples.capture.shipper import OP_HEADER, SEQ_HEADER
from spark_examples.change_format import SCHEMA_OPERATION, encode_key, encode_value
from spark_examples.databases import open_database
from spark_examples.testing import (
    REPOSITORY_ROOT,
    TABLE_NAMES,
    CaptureProcess,
    PacedWorkload,
    capture_drained,
    create_source_tables,
    last_record_offset,
    topic_end_offset,
    wait_until,
)
from spark_examples.verify import compare_tables
from tests.sync.spark_marks import SPARK_PIPELINE

pytestmark = SPARK_PIPELINE
TOPIC = "shop"
REVIEW_SETTINGS = [f"{REVIEW_HOOK_SETTING}={REVIEW_HOOK}"]
APPLY_TIMEOUT_S = 180
DRAIN_TIMEOUT_S = 180


def apply_once(
    spark: SparkSession, bootstrap: str, topic: str, dest: str, checkpoint: Path
) -> None:
    """One ``--once`` run of the apply job (trigger availableNow); fails the test on error."""
    options = ApplyOptions(bootstrap, topic, dest, str(checkpoint), once=True)
    query = start_apply(spark, options)
    try:
        finished = query.awaitTermination(APPLY_TIMEOUT_S)
    except Exception:  # the query failed: its message is read below
        finished = True
    if not finished:
        query.stop()
        pytest.fail(f"apply of {topic} into {dest} did not finish in {APPLY_TIMEOUT_S} s")
    message = apply_error_message(query)
    assert message is None, message[-3000:]


def committed_sequences(bootstrap: str, topic: str) -> list[int]:
    """The change sequence numbers of every committed change record of ``topic`` (not the
    schema records), in offset order."""
    from confluent_kafka import Consumer, TopicPartition

    end = topic_end_offset(bootstrap, topic)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "kshim-pipeline-check",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    sequences: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                assert message.error() is None, message.error()
                headers = dict(message.headers() or [])
                if headers[OP_HEADER] != SCHEMA_OPERATION.encode():
                    sequences.append(int(headers[SEQ_HEADER]))
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= end:
                return sequences
    finally:
        consumer.close()
    pytest.fail(f"could not read {topic} up to offset {end}")


@dataclass
class Scenario:
    source_url: str
    destinations: list[str]
    operations: int
    kill_broker: bool = True
    kill_capture: bool = True
    late_destination: str | None = None  # bootstrapped from T.full half-way
    streamed: list[str] = field(default_factory=list)  # one streaming query each, throughout
    seed: int = 7
    per_second: int = 400  # workload pace: slow enough for kills and runs to land mid-stream


def run_scenario(spark: SparkSession, work: Path, scenario: Scenario) -> None:
    """Runs the experiment; asserts equality, exactly-once on the topic and apply offsets."""
    generator = random.Random(scenario.seed)
    source = open_database(scenario.source_url)
    try:
        create_source_tables(source)
    finally:
        source.close()
    broker = BrokerProcess(work / "broker", REVIEW_SETTINGS).start()
    capture = CaptureProcess(scenario.source_url, broker.bootstrap, TOPIC, work / "capture.log")
    workload = PacedWorkload(
        scenario.source_url, scenario.operations, scenario.per_second, scenario.seed
    )
    everywhere = [*scenario.destinations, *scenario.streamed, scenario.late_destination]
    checkpoints = {dest: work / f"checkpoint-{index}" for index, dest in enumerate(everywhere)}
    streams: list[StreamingQuery] = []

    def apply_all() -> None:
        for dest in scenario.destinations:
            apply_once(spark, broker.bootstrap, TOPIC, dest, checkpoints[dest])

    kill_points: list[int] = []  # operations done when a kill happened
    try:
        ensure_topic(broker.bootstrap, TOPIC)
        for dest in scenario.streamed:  # lives through the broker kill: same port on restart
            options = ApplyOptions(
                broker.bootstrap, TOPIC, dest, str(checkpoints[dest]), group=default_group(dest)
            )
            streams.append(start_apply(spark, options))
        capture.start()
        workload.start()
        if scenario.kill_broker:
            workload.reached(0.15)
            broker.kill()
            kill_points.append(workload.done)
            time.sleep(1.0)  # the capture and the workload go on without the broker
            broker = BrokerProcess(work / "broker", REVIEW_SETTINGS, port=broker.port).start()
        if scenario.kill_capture:
            workload.reached(0.3)
            time.sleep(generator.uniform(0.0, 1.0))
            capture.kill()
            kill_points.append(workload.done)
            capture.start()
        apply_all()  # while the workload goes on
        if scenario.late_destination is not None:
            workload.reached(0.5)  # full data so far, then the changes after it
            dest = scenario.late_destination
            apply_once(spark, broker.bootstrap, TOPIC + ".full", dest, checkpoints[dest])
            kill_points.append(workload.done)  # not a kill: the bootstrap is mid-stream too
        workload.join(180)
        assert workload.error is None and workload.done == scenario.operations
        assert all(point < scenario.operations for point in kill_points), kill_points
        wait_until(lambda: capture_drained(scenario.source_url, TOPIC), DRAIN_TIMEOUT_S,
                   "capture of every change")  # fmt: skip
        capture.stop()
        end = topic_end_offset(broker.bootstrap, TOPIC)
        wait_until(lambda: topic_end_offset(broker.bootstrap, TOPIC + ".full") >= end, 60,
                   "T.full caught up")  # fmt: skip
        apply_all()
        if scenario.late_destination is not None:
            dest = scenario.late_destination
            apply_once(spark, broker.bootstrap, TOPIC + ".full", dest, checkpoints[dest])
        wait_for_streams(streams, scenario.streamed, last_record_offset(broker.bootstrap, TOPIC))
        check_outcome(broker.bootstrap, scenario)
    finally:
        for query in streams:
            query.stop()
        capture.kill()
        broker.stop()


def wait_for_streams(streams: list[StreamingQuery], destinations: list[str], last: int) -> None:
    """Waits until each streaming query has applied the last record, then stops it."""

    def applied(dest: str, query: StreamingQuery) -> bool:
        assert query.isActive, apply_error_message(query)
        database = open_database(dest)
        try:
            return next_offset(database, TOPIC, 0) > last
        finally:
            database.close()

    for dest, query in zip(destinations, streams, strict=True):
        wait_until(functools.partial(applied, dest, query), APPLY_TIMEOUT_S, f"apply into {dest}")
        query.stop()


def committed_is(bootstrap: str, group: str, offset: int) -> bool:
    """Whether ``group`` committed ``offset`` for partition 0 of TOPIC."""
    with GroupAdmin.connected(bootstrap, 10.0) as admin:
        return admin.committed(group, TOPIC, [0]).get(0) == offset


def check_outcome(bootstrap: str, scenario: Scenario) -> None:
    source = open_database(scenario.source_url)
    try:
        issued = int(source.execute("SELECT last_seq FROM kshim_change_seq")[0][0])
    finally:
        source.close()
    assert issued >= scenario.operations  # an update of a row is one change, like the rest
    # No duplicate, no missing change: each sequence committed exactly once, in order.
    assert committed_sequences(bootstrap, TOPIC) == list(range(1, issued + 1))
    last = last_record_offset(bootstrap, TOPIC)
    for dest in [*scenario.destinations, *scenario.streamed]:
        assert compare_tables(scenario.source_url, dest, TABLE_NAMES) == [], dest
        database = open_database(dest)
        try:
            assert next_offset(database, TOPIC, 0) == last + 1
        finally:
            database.close()
    for dest in scenario.streamed:  # the progress each batch committed: the broker sees no lag
        group = default_group(dest)
        at_end = functools.partial(committed_is, bootstrap, group, last + 1)
        wait_until(at_end, 30, f"{group} committed to the end")
    if scenario.late_destination is not None:
        dest = scenario.late_destination
        assert compare_tables(scenario.source_url, dest, TABLE_NAMES) == [], dest
        database = open_database(dest)
        try:  # the last change of T is its key's latest, so T.full holds it too
            assert next_offset(database, TOPIC + ".full", 0) == last + 1
        finally:
            database.close()


def test_sqlite_source_to_sqlite_and_duckdb_through_broker_and_capture_kills(
    spark: SparkSession, tmp_path: Path, registry: Path
) -> None:
    run_scenario(
        spark,
        tmp_path,
        Scenario(
            source_url=f"sqlite:///{tmp_path}/source.db",
            destinations=[f"sqlite:///{tmp_path}/dest.db"],  # --once runs, as a scheduler would
            streamed=[f"duckdb:///{tmp_path}/dest.duckdb"],  # one query through every kill
            operations=10_000,
        ),
    )


def test_late_destination_bootstraps_from_the_full_view(
    spark: SparkSession, tmp_path: Path, registry: Path
) -> None:
    run_scenario(
        spark,
        tmp_path,
        Scenario(
            source_url=f"sqlite:///{tmp_path}/source.db",
            destinations=[f"sqlite:///{tmp_path}/dest.db"],
            operations=3_000,
            kill_broker=False,
            kill_capture=False,
            late_destination=f"sqlite:///{tmp_path}/late.db",
            seed=11,
            per_second=150,
        ),
    )
    late = open_database(f"sqlite:///{tmp_path}/late.db")
    try:  # it only ever read the view
        assert late.execute("SELECT topic FROM kshim_apply_state") == [(TOPIC + ".full",)]
    finally:
        late.close()


def test_a_change_that_cannot_be_applied_stops_the_cli_job_naming_its_offset(
    shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    topic = f"apply-failure-{tmp_path.name}"
    columns = {"id": "integer", "name": "text"}
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    for offset, name in enumerate(["ok", "bad", "ok"]):
        row = {"id": offset, "name": name}
        producer.produce(topic, encode_value(offset, "insert", "t", columns, row),
                         encode_key("t", {"id": offset}))  # fmt: skip
    assert producer.flush(30) == 0
    dest = f"sqlite:///{tmp_path}/dest.db"
    database = open_database(dest)
    database.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT CHECK (name <> 'bad'))")
    database.close()
    command = [
        sys.executable, "-m", "spark_examples.apply", "--bootstrap", shared_broker.bootstrap,
        "--topic", topic, "--dest", dest, "--checkpoint", str(tmp_path / "checkpoint"),
        "--once", "--max-retries", "1",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=APPLY_TIMEOUT_S,
                            check=False, cwd=REPOSITORY_ROOT)  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    expected = f"apply stopped: ApplyError: cannot apply topic {topic} partition 0 offset 1 key"
    assert expected in result.stderr
    assert "after 2 attempt(s)" in result.stderr
    database = open_database(dest)
    try:  # the good record before it was rolled back with it: nothing skipped, nothing half
        assert database.execute("SELECT count(*) FROM t") == [(0,)]
        assert next_offset(database, topic, 0) == 0
    finally:
        database.close()


def test_bootstrap_goes_on_when_the_view_compacts_past_its_position(
    spark: SparkSession, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Every record below the reader's position gets superseded (the view's first live
    record moves past it). Nothing is lost, the newer records follow, and T.full's log start
    stays put, so the job, with failOnDataLoss=true as on T, goes on."""
    from confluent_kafka import Producer

    topic, columns = f"compacted-{tmp_path.name}", {"id": "integer", "name": "text"}
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})

    def write(changes: list[tuple[int, str]]) -> None:
        for row_id, name in changes:
            row = {"id": row_id, "name": name}
            producer.produce(topic, encode_value(0, "update", "t", columns, row),
                             encode_key("t", {"id": row_id}))  # fmt: skip
        assert producer.flush(30) == 0
        end = topic_end_offset(shared_broker.bootstrap, topic)
        wait_until(lambda: topic_end_offset(shared_broker.bootstrap, topic + ".full") >= end,
                   30, "the view caught up")  # fmt: skip

    dest, checkpoint = f"sqlite:///{tmp_path}/dest.db", tmp_path / "checkpoint"
    write([(1, "v1"), (2, "v1")])  # offsets 0, 1
    apply_once(spark, shared_broker.bootstrap, topic + ".full", dest, checkpoint)
    write([(1, "v2"), (1, "v3"), (2, "v2")])  # offsets 2, 3, 4: the view's first live is 3
    apply_once(spark, shared_broker.bootstrap, topic + ".full", dest, checkpoint)  # from 2
    database = open_database(dest)
    try:
        assert list(database.rows("t")) == [{"id": 1, "name": "v3"}, {"id": 2, "name": "v2"}]
        assert next_offset(database, topic + ".full", 0) == 5
    finally:
        database.close()
