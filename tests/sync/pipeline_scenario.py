"""The VENUS consistency experiment on the whole pipeline, whatever runs the Spark apply job.

Random inserts, updates and deletes run on a SQLite source, some of their transactions
rolled back by the application, while the capture child process ships them through a kshim
broker with the capture review hook, and the apply job writes the destinations: ``--once``
runs, as a scheduler would start them, and streaming queries that live through the kills.
The broker is killed with -9 and restarted on the same port and data directory mid-stream,
the capture is killed with -9 at a random point and restarted, and a destination started
late is bootstrapped from ``T.full`` while the changes flow. At the end every destination
equals the source, schemas included (verify.compare_tables), the topic holds every change
sequence exactly once, and each destination's stored next offset is the end of the topic.

An ``Applier`` runs the job: in this process's Spark session (local mode,
``SessionApplier``) or submitted to a standalone cluster (tests/sync/spark_submission.py).
"""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from kshim.client.group_admin import GroupAdmin
from kshim.testing import BrokerProcess
from spark_examples.apply.job import RUN_PREFIX, ApplyOptions, apply_error_message, start_apply
from spark_examples.apply.pipelined import ApplyQuery
from spark_examples.apply.progress import default_group
from spark_examples.apply.sink import next_offset
from spark_examples.capture.broker import ensure_topic
from spark_examples.capture.review import REVIEW_HOOK, REVIEW_HOOK_SETTING
from spark_examples.capture.shipper import OP_HEADER, SEQ_HEADER
from spark_examples.change_format import SCHEMA_OPERATION
from spark_examples.databases import open_database
from spark_examples.testing import (
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

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOPIC = "shop"
REVIEW_SETTINGS = [f"{REVIEW_HOOK_SETTING}={REVIEW_HOOK}"]
APPLY_TIMEOUT_S = 180
DRAIN_TIMEOUT_S = 180
# A streaming query's start, up to its first trigger (a spark-submit: two JVMs and Python).
STREAM_START_TIMEOUT_S = 120


class Stream(Protocol):
    """A streaming apply query, started by an ``Applier``."""

    def reading(self) -> bool:
        """Whether the query has read the topic's starting offsets from the broker; fails
        the test if the query ended."""
        ...

    def applied_through(self, offset: int) -> bool:
        """Whether the record at ``offset`` is applied; fails the test if the query ended."""
        ...

    def stop(self) -> None: ...


class Applier(Protocol):
    """Runs the apply job; each run fails the test when the job fails."""

    def apply_once(self, bootstrap: str, topic: str, dest: str, checkpoint: Path) -> None:
        """One ``--once`` run (trigger availableNow), returning when it has finished."""
        ...

    def start_stream(self, bootstrap: str, topic: str, dest: str, checkpoint: Path) -> Stream:
        """Starts a streaming query that commits its progress to ``default_group(dest)``;
        returns without waiting for it to read (``Stream.reading``)."""
        ...


def source_offsets_logged(checkpoint: Path) -> bool:
    """Whether a query's checkpoint (its run's own, job.run_checkpoint) holds its source's
    starting offsets, which Spark logs (``sources/0/0``) at the query's first trigger."""
    return any(checkpoint.glob(f"{RUN_PREFIX}*/sources/0/0"))


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


@dataclass
class SessionStream:
    """A streaming query of this process's session (local mode)."""

    query: ApplyQuery
    dest: str
    checkpoint: Path

    def reading(self) -> bool:
        assert self.query.isActive, apply_error_message(self.query)
        return source_offsets_logged(self.checkpoint)

    def applied_through(self, offset: int) -> bool:
        assert self.query.isActive, apply_error_message(self.query)
        return applied_offset(self.dest) > offset

    def stop(self) -> None:
        self.query.stop()


@dataclass
class SessionApplier:
    """The apply job in ``spark``'s own session, the way ``python -m spark_examples.apply``
    runs it (local mode)."""

    spark: SparkSession

    def apply_once(self, bootstrap: str, topic: str, dest: str, checkpoint: Path) -> None:
        apply_once(self.spark, bootstrap, topic, dest, checkpoint)

    def start_stream(self, bootstrap: str, topic: str, dest: str, checkpoint: Path) -> Stream:
        options = ApplyOptions(bootstrap, topic, dest, str(checkpoint), group=default_group(dest))
        return SessionStream(start_apply(self.spark, options), dest, checkpoint)


def applied_offset(dest: str, topic: str = TOPIC) -> int:
    """The destination's stored next offset of partition 0 of ``topic``."""
    database = open_database(dest)
    try:
        return next_offset(database, topic, 0)
    finally:
        database.close()


@dataclass
class Scenario:
    source_url: str
    destinations: list[str]  # --once runs, mid-stream and at the end
    operations: int
    kill_broker: bool = True
    kill_capture: bool = True
    late_destination: str | None = None  # bootstrapped from T.full mid-stream
    streamed: list[str] = field(default_factory=list)  # one streaming query each, throughout
    seed: int = 7
    per_second: int = 400  # workload pace: slow enough for kills and runs to land mid-stream
    bootstrap_at: float = 0.5  # share of the operations done when the late destination starts
    rollback_share: float = 0.05  # of the source transactions, rolled back by the application
    # The workload waits here until every kill and the bootstrap are done, so that changes
    # follow them however slow the machine (PacedWorkload.hold_at).
    hold_at: float = 0.9


class Broker(Protocol):
    """What the scenario does with its broker (BrokerProcess's interface): kshim's own, or
    whatever stands in its place (tests/gateway/test_gateway_pipeline.py)."""

    @property
    def bootstrap(self) -> str: ...

    def start(self) -> object:
        """Starts it, or starts it again after ``kill`` with the clients' bootstrap."""
        ...

    def kill(self) -> None: ...

    def stop(self) -> None: ...


class ScenarioRun:
    """The processes of one run of a scenario and the steps that drive them."""

    def __init__(
        self, applier: Applier, work: Path, scenario: Scenario, broker: Broker | None = None
    ) -> None:
        self.applier, self.work, self.scenario = applier, work, scenario
        self.broker = broker or BrokerProcess(work / "broker", REVIEW_SETTINGS)
        self.capture = CaptureProcess(
            scenario.source_url, self.broker.bootstrap, TOPIC, work / "capture.log"
        )
        self.workload = PacedWorkload(
            scenario.source_url, scenario.operations, scenario.per_second, scenario.seed,
            scenario.rollback_share, scenario.hold_at,
        )  # fmt: skip
        everywhere = [*scenario.destinations, *scenario.streamed, scenario.late_destination]
        self.checkpoints = {dest: work / f"checkpoint-{index}" for index, dest in
                            enumerate(everywhere)}  # fmt: skip
        self.streams: list[Stream] = []
        self.progress_points: list[int] = []  # operations done at each kill and at bootstrap

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap  # the same port after a restart

    def start(self) -> None:
        """The broker, the streaming queries (through every kill to come), the capture and
        the workload: the queries start up while the changes begin."""
        self.broker.start()
        ensure_topic(self.bootstrap, TOPIC)
        for dest in self.scenario.streamed:
            stream = self.applier.start_stream(self.bootstrap, TOPIC, dest, self.checkpoints[dest])
            self.streams.append(stream)
        self.capture.start()
        self.workload.start()

    def disturb(self, generator: random.Random) -> None:
        """Kills the broker, then the capture, runs the --once destinations and bootstraps the
        late one, each while the workload goes on."""
        for dest, stream in zip(self.scenario.streamed, self.streams, strict=True):
            wait_until(stream.reading, STREAM_START_TIMEOUT_S, f"the query into {dest} reading")
        if self.scenario.kill_broker:
            self.workload.reached(0.15)
            self.broker.kill()
            self.progress_points.append(self.workload.done)
            time.sleep(1.0)  # the capture and the workload go on without the broker
            self.broker.start()  # the same port and data directory
        if self.scenario.kill_capture:
            self.workload.reached(0.3)
            time.sleep(generator.uniform(0.0, 1.0))
            self.capture.kill()
            self.progress_points.append(self.workload.done)
            self.capture.start()
        self.apply_all()
        if self.scenario.late_destination is not None:
            self.workload.reached(self.scenario.bootstrap_at)  # full data so far, then changes
            before = self.workload.done
            self.bootstrap_late()
            self.progress_points.append(self.workload.done)
            assert self.workload.done > before, "no change made while the bootstrap ran"

    def apply_all(self) -> None:
        for dest in self.scenario.destinations:
            self.applier.apply_once(self.bootstrap, TOPIC, dest, self.checkpoints[dest])

    def bootstrap_late(self) -> None:
        if self.scenario.late_destination is not None:
            dest = self.scenario.late_destination
            self.applier.apply_once(self.bootstrap, TOPIC + ".full", dest, self.checkpoints[dest])

    def finish(self) -> None:
        """Waits for the workload, the capture and T.full, then applies everything."""
        self.workload.join(180)
        assert self.workload.error is None and self.workload.done == self.scenario.operations
        # Each kill, and the bootstrap, landed while changes were still being made.
        assert all(point < self.scenario.operations for point in self.progress_points), (
            self.progress_points
        )
        assert (self.workload.rolled_back > 0) == (self.scenario.rollback_share > 0)
        wait_until(lambda: capture_drained(self.scenario.source_url, TOPIC), DRAIN_TIMEOUT_S,
                   "capture of every change")  # fmt: skip
        self.capture.stop()
        end = topic_end_offset(self.bootstrap, TOPIC)
        wait_until(lambda: topic_end_offset(self.bootstrap, TOPIC + ".full") >= end, 60,
                   "T.full caught up")  # fmt: skip
        self.apply_all()
        self.bootstrap_late()
        last = last_record_offset(self.bootstrap, TOPIC)
        for dest, stream in zip(self.scenario.streamed, self.streams, strict=True):
            wait_until(functools.partial(stream.applied_through, last), APPLY_TIMEOUT_S,
                       f"apply into {dest}")  # fmt: skip
            stream.stop()

    def close(self) -> None:
        self.workload.stop()
        for stream in self.streams:
            stream.stop()
        self.capture.kill()
        self.broker.stop()


def run_scenario(
    applier: Applier, work: Path, scenario: Scenario, broker: Broker | None = None
) -> None:
    """Runs the experiment; asserts equality, exactly-once on the topic and apply offsets.
    ``broker`` (not started) stands in for a kshim broker with the capture's review hook."""
    source = open_database(scenario.source_url)
    try:
        create_source_tables(source)
    finally:
        source.close()
    run = ScenarioRun(applier, work, scenario, broker)
    try:
        run.start()
        run.disturb(random.Random(scenario.seed))
        run.workload.release()
        run.finish()
        check_outcome(run.bootstrap, scenario)
    finally:
        run.close()


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
        assert applied_offset(dest) == last + 1, dest
    for dest in scenario.streamed:  # the progress each batch committed: the broker sees no lag
        group = default_group(dest)
        at_end = functools.partial(committed_is, bootstrap, group, last + 1)
        wait_until(at_end, 30, f"{group} committed to the end")
    if scenario.late_destination is not None:
        dest = scenario.late_destination
        assert compare_tables(scenario.source_url, dest, TABLE_NAMES) == [], dest
        # The last change of T is its key's latest, so T.full holds it too.
        assert applied_offset(dest, TOPIC + ".full") == last + 1, dest
