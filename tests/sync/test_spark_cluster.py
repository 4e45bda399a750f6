"""The apply job on a real Spark standalone cluster, submitted with spark-submit as a user would.

A master and two workers (1 core, 1 GB each) run as local processes from pyspark's own
distribution (spark_examples/cluster.py). A SQLite source's random changes are captured into
a kshim topic first; then the job runs in small micro-batches (``--once``: trigger
availableNow, which keeps maxOffsetsPerTrigger) while the test takes a piece of the cluster
away:

- applying ``T``, the worker whose executor runs the job's tasks is killed with SIGKILL (its
  process group: the worker and its executor, a lost machine) once some but not all changes
  are applied. Spark runs the rest on the other worker; the destination ends equal to the
  source (verify.compare_tables) with its stored next offset at the end of the topic, and the
  job's per-batch reports ("N applied, M already applied") show every change applied once.
- bootstrapping a new destination from ``T.full`` on the same cluster (the surviving worker),
  the driver (the spark-submit process group) is killed with SIGKILL after the sink committed
  a micro-batch and before Spark recorded it in the checkpoint, and the same command is
  submitted again: it resumes from the checkpoint, the sink skips the one replayed batch,
  and the destination ends equal.

Skipped without Java or the connector's jars (spark_marks).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kshim.testing import BrokerProcess
from spark_examples.apply.sink import next_offset
from spark_examples.capture.broker import ensure_topic
from spark_examples.capture.review import REVIEW_HOOK, REVIEW_HOOK_SETTING
from spark_examples.cluster import (
    ClusterError,
    StandaloneCluster,
    spark_environment,
    submit_command,
)
from spark_examples.databases import open_database
from spark_examples.spark_session import connector_jars
from spark_examples.testing import (
    REPOSITORY_ROOT,
    TABLE_NAMES,
    CaptureProcess,
    Workload,
    capture_drained,
    create_source_tables,
    last_record_offset,
    registry_environment,
    topic_end_offset,
    wait_until,
)
from spark_examples.verify import compare_tables
from tests.sync.capture_helpers import read_topic
from tests.sync.spark_marks import SPARK_PIPELINE

pytestmark = SPARK_PIPELINE
TOPIC = "shop"
CHANGES = 3_000
# Small micro-batches: 20 of them, so that a kill lands between the first and the last.
BATCH = 150
# Offsets per micro-batch of the bootstrap: 10 batches, the kill after the second.
BOOTSTRAP_BATCH = 300
SUBMIT_TIMEOUT_S = 150
PROGRESS_TIMEOUT_S = 90
# Spark writes a batch's commit log entry tens of milliseconds after foreachBatch returns.
WINDOW_POLL_S = 0.005
# Batches the killed driver commits first, so that a resubmission without its checkpoint
# would replay (and the sink skip) more than the one batch a lost commit explains.
COMMITTED_BEFORE_KILL = 2
REPORT = re.compile(r"^batch (\d+): (\d+) applied, (\d+) already applied, up to offset (\d+)", re.M)


@dataclass(frozen=True)
class Pipeline:
    """A broker whose topic holds the source's captured changes, and the cluster."""

    source_url: str
    broker: BrokerProcess
    cluster: StandaloneCluster
    records: int  # committed records of the topic: each change and each table's schema
    last_offset: int  # of the topic's last committed record
    work: Path


@dataclass(frozen=True)
class BatchReport:
    batch_id: int
    applied: int
    skipped: int
    up_to_offset: int


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    """Captures a workload into the broker, then starts the cluster (module-wide: both take
    about half a minute)."""
    work = tmp_path_factory.mktemp("cluster")
    source_url = f"sqlite:///{work}/source.db"
    source = open_database(source_url)
    try:
        create_source_tables(source)
        Workload(source, seed=37).run(CHANGES)
        changes = int(source.execute("SELECT last_seq FROM kshim_change_seq")[0][0])
    finally:
        source.close()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in registry_environment(work).items():
            patch.setenv(name, value)  # the broker and the capture inherit it
        broker = BrokerProcess(work / "broker", [f"{REVIEW_HOOK_SETTING}={REVIEW_HOOK}"]).start()
        cluster = StandaloneCluster(work / "spark")
        capture = CaptureProcess(source_url, broker.bootstrap, TOPIC, work / "capture.log")
        try:
            ensure_topic(broker.bootstrap, TOPIC)
            assert capture.start(once=True).wait(120) == 0, (work / "capture.log").read_text()
            assert capture_drained(source_url, TOPIC)
            end = topic_end_offset(broker.bootstrap, TOPIC)
            wait_until(lambda: topic_end_offset(broker.bootstrap, TOPIC + ".full") >= end, 60,
                       "T.full caught up")  # fmt: skip
            cluster.start()
            last = last_record_offset(broker.bootstrap, TOPIC)
            records = len(read_topic(broker.bootstrap, TOPIC, schemas=True))
            assert records == changes + len(TABLE_NAMES)  # a schema per table, in the first batch
            yield Pipeline(source_url, broker, cluster, records, last, work)
        finally:
            capture.kill()
            cluster.stop()
            broker.stop()


class Submission:
    """One ``spark-submit`` of the apply job, in a process group of its own (the JVM and the
    Python driver it starts), its output in a log file."""

    def __init__(
        self, pipeline: Pipeline, topic: str, dest: str, name: str, batch: int = BATCH
    ) -> None:
        jars = connector_jars()
        assert jars is not None  # spark_marks skips this module without them
        job = [
            "--bootstrap", pipeline.broker.bootstrap, "--topic", topic, "--dest", dest,
            "--checkpoint", str(pipeline.work / f"checkpoint-{Path(dest).stem}"), "--once",
            "--max-offsets-per-trigger", str(batch),
        ]  # fmt: skip
        self.command = submit_command(pipeline.cluster.master_url, jars, job)
        self.log_path = pipeline.work / f"{name}.log"
        environment = spark_environment(pipeline.cluster.work_dir)
        # The driver prints a line per batch: unbuffered, each reaches the log as printed.
        environment.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(REPOSITORY_ROOT))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=environment,
                cwd=REPOSITORY_ROOT, start_new_session=True,
            )  # fmt: skip

    def finish(self) -> list[BatchReport]:
        """Waits for the job to exit; asserts it succeeded; returns its batch reports."""
        try:
            status = self.process.wait(SUBMIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"spark-submit did not finish in {SUBMIT_TIMEOUT_S} s\n{self.tail()}")
        assert status == 0, self.tail()
        return self.reports()

    def signal(self, signal_number: int) -> None:
        """Signals the driver's process group (the JVM and the Python driver)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal_number)

    def kill(self) -> None:
        """SIGKILL to the driver's process group, as a crashed driver machine."""
        self.signal(signal.SIGKILL)
        self.process.wait(30)

    def reports(self) -> list[BatchReport]:
        text = self.log_path.read_text(errors="replace")
        return [BatchReport(*map(int, found)) for found in REPORT.findall(text)]

    def tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-40:])


def applied_offset(dest: str, topic: str = TOPIC) -> int:
    """The destination's stored next offset of ``topic`` (0 before its first batch)."""
    if not Path(dest.removeprefix("sqlite:///")).exists():
        return 0
    database = open_database(dest)
    try:
        return next_offset(database, topic, 0) if database.table_exists("kshim_apply_state") else 0
    finally:
        database.close()


def wait_for_progress(submission: Submission, dest: str, at_least: int) -> int:
    """Waits until the destination holds changes up to ``at_least``; returns its offset."""

    def progressed() -> bool:
        assert submission.process.poll() is None, submission.tail()
        return applied_offset(dest) >= at_least

    wait_until(progressed, PROGRESS_TIMEOUT_S, f"apply up to offset {at_least}")
    return applied_offset(dest)


def assert_equal_and_complete(pipeline: Pipeline, dest: str, topic: str = TOPIC) -> None:
    assert compare_tables(pipeline.source_url, dest, TABLE_NAMES) == [], dest
    assert applied_offset(dest, topic) == pipeline.last_offset + 1


@pytest.fixture
def submit(pipeline: Pipeline) -> Iterator[Callable[[str, str, str], Submission]]:
    """Starts spark-submit runs (topic, destination URL, log name; the bootstrap of T.full in
    micro-batches of BOOTSTRAP_BATCH offsets); at the end of the test, kills any still
    running."""
    started: list[Submission] = []

    def start(topic: str, dest: str, name: str) -> Submission:
        batch = BOOTSTRAP_BATCH if topic.endswith(".full") else BATCH
        started.append(Submission(pipeline, topic, dest, name, batch))
        return started[-1]

    yield start
    for submission in started:
        submission.kill()


def test_a_worker_killed_mid_apply_changes_nothing_in_the_outcome(
    pipeline: Pipeline, submit: Callable[[str, str, str], Submission]
) -> None:
    cluster, dest = pipeline.cluster, f"sqlite:///{pipeline.work}/dest-worker-kill.db"
    submission = submit(TOPIC, dest, "apply-worker-kill")
    offset_at_kill = wait_for_progress(submission, dest, at_least=2 * BATCH)
    application = cluster.active_application()
    assert application is not None
    tasks = [cluster.tasks_run(index, application) for index in range(cluster.workers)]
    busy = tasks.index(max(tasks))  # the worker whose executor reads the topic
    other = 1 - busy
    assert tasks[busy] > 0, tasks
    cluster.kill_worker(busy)
    cluster.wait_for_alive_workers(1)
    reports = submission.finish()
    assert offset_at_kill < pipeline.last_offset, "the job ended before the kill"
    # The batches after the kill ran on the other worker's executor.
    assert cluster.tasks_run(other, application) > tasks[other], submission.tail()
    assert_equal_and_complete(pipeline, dest)
    # Once each: no batch applied twice, no record skipped as already applied.
    batch_ids = [report.batch_id for report in reports]
    assert batch_ids == list(range(len(reports)))
    assert sum(report.applied for report in reports) == pipeline.records
    assert sum(report.skipped for report in reports) == 0
    ends = [report.up_to_offset for report in reports]
    assert ends == sorted(set(ends)), ends


def test_a_bootstrap_whose_driver_is_killed_resumes_from_its_checkpoint(
    pipeline: Pipeline, submit: Callable[[str, str, str], Submission]
) -> None:
    """The driver dies after the sink committed a micro-batch and before Spark recorded it
    in the checkpoint's commit log, the one moment where a replay is certain: the
    resubmitted job must run that batch again, and the sink must skip all of it."""
    topic, dest = TOPIC + ".full", f"sqlite:///{pipeline.work}/dest-bootstrap.db"
    checkpoint = pipeline.work / f"checkpoint-{Path(dest).stem}"
    first = submit(topic, dest, "bootstrap")
    kill_between_sink_and_checkpoint(first, dest, topic, checkpoint, COMMITTED_BEFORE_KILL)
    committed = committed_batches(checkpoint)
    assert applied_offset(dest, topic) > committed_end(checkpoint, topic)
    # The master lets the dead driver's executors go before the second one asks for cores.
    wait_until(lambda: pipeline.cluster.active_application() is None, 60, "the dead app gone")
    second = submit(topic, dest, "bootstrap-resubmitted")
    resumed = second.finish()
    assert_equal_and_complete(pipeline, dest, topic)
    # Numbering goes on from the checkpoint; the first batch is the one the driver died in,
    # read again from the offsets Spark had logged for it, and skipped record by record.
    replayed, *rest = resumed
    assert replayed.batch_id == committed >= COMMITTED_BEFORE_KILL, (committed, replayed)
    assert replayed.applied == 0 and replayed.skipped > 0, replayed
    assert all(report.skipped == 0 for report in rest), rest


def committed_batches(checkpoint: Path) -> int:
    """How many micro-batches the checkpoint's commit log holds (files 0, 1, ...)."""
    return len(list((checkpoint / "commits").glob("[0-9]*")))


def committed_end(checkpoint: Path, topic: str) -> int:
    """The end offset (exclusive) of the last micro-batch in the checkpoint's commit log,
    from the offset log of that batch (its third line: the source's offsets as JSON), 0
    before the first commit."""
    committed = committed_batches(checkpoint)
    if committed == 0:
        return 0
    lines = (checkpoint / "offsets" / str(committed - 1)).read_text().splitlines()
    return int(json.loads(lines[2])[topic]["0"])


def kill_between_sink_and_checkpoint(
    submission: Submission, dest: str, topic: str, checkpoint: Path, after_batches: int
) -> None:
    """Kills the driver once the destination holds a micro-batch that the checkpoint has not
    committed (foreachBatch returned, Spark's commit log not yet written), after
    ``after_batches`` committed batches.

    Seen ahead, the driver is stopped (SIGSTOP) and the checkpoint read again: if Spark
    committed in between, the driver goes on (SIGCONT) and the next batch is watched; if
    not, the state is frozen as seen and SIGKILL makes it final.
    """
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while True:
        applied = applied_offset(dest, topic)  # first: a commit after it cannot mislead
        enough_committed = committed_batches(checkpoint) >= after_batches
        if enough_committed and applied > committed_end(checkpoint, topic):
            submission.signal(signal.SIGSTOP)
            if applied > committed_end(checkpoint, topic):
                submission.kill()
                return
            submission.signal(signal.SIGCONT)
        assert submission.process.poll() is None, "the job ended: " + submission.tail()
        assert time.monotonic() < deadline, "no micro-batch seen between sink and checkpoint"
        time.sleep(WINDOW_POLL_S)


def test_a_daemon_that_cannot_start_fails_the_start_with_its_log(tmp_path: Path) -> None:
    cluster = StandaloneCluster(tmp_path, worker_memory="plenty")  # not a Spark memory size
    with pytest.raises(ClusterError, match=r"worker-\d exited waiting for 2 ALIVE") as raised:
        cluster.start()
    assert "Usage: Worker" in str(raised.value)  # the worker's own words, from its log
    assert all(daemon.process is None for daemon in [cluster.master, *cluster.worker_daemons])
