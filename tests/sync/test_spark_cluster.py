"""The apply job on a real Spark standalone cluster, submitted with spark-submit as a user would.

A master and two workers (1 core, 1 GB each) run as local processes from pyspark's own
distribution (spark_examples/cluster.py), started once for the module.

- The whole pipeline experiment of test_pipeline_spark.py (tests/sync/pipeline_scenario.py:
  rolled-back source transactions, the broker killed with -9 and restarted, the capture
  crashed and restarted, a destination bootstrapped from ``T.full`` while changes flow) with
  the apply job submitted to the cluster: a streaming query lives through the kills on one
  worker while the bootstrap runs on the other, and every destination ends equal.

For the other two, a SQLite source's random changes are captured into a kshim topic first;
then the job runs in small micro-batches (``--once``: trigger availableNow, which keeps
maxOffsetsPerTrigger) while the test takes a piece of the cluster away:

- applying ``T``, the worker whose executor runs the job's tasks is killed with SIGKILL (its
  process group: the worker and its executor, a lost machine) once some but not all changes
  are applied. Spark runs the rest on the other worker; the destination ends equal to the
  source (verify.compare_tables) with its stored next offset at the end of the topic, and the
  job's per-batch reports ("N applied, M already applied") show every change applied once.
- bootstrapping a new destination from ``T.full`` on the same cluster (the surviving worker),
  the driver (the spark-submit process group) is killed with SIGKILL when Spark has recorded
  a micro-batch in its checkpoint that the destination does not hold yet, and the same
  command is submitted again: it resumes from the destination's stored offset (not the
  checkpoint's, which would lose that batch), and the destination ends equal.

Skipped without Java or the connector's jars (spark_marks).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kshim.testing import BrokerProcess
from spark_examples.apply.job import RUN_PREFIX
from spark_examples.apply.sink import SELECT_NEXT_OFFSET, next_offset
from spark_examples.capture.broker import ensure_topic
from spark_examples.capture.review import REVIEW_HOOK, REVIEW_HOOK_SETTING
from spark_examples.cluster import (
    ClusterError,
    StandaloneCluster,
)
from spark_examples.databases import open_database
from spark_examples.testing import (
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
from tests.sync.pipeline_scenario import Scenario, run_scenario
from tests.sync.spark_marks import SPARK_PIPELINE
from tests.sync.spark_submission import ClusterApplier, Submission, job_arguments

pytestmark = SPARK_PIPELINE
TOPIC = "shop"
CHANGES = 3_000
# Small micro-batches: 20 of them, so that a kill lands between the first and the last.
BATCH = 150
# Offsets per micro-batch of the bootstrap: 10 batches, the kill after the first.
BOOTSTRAP_BATCH = 300
PROGRESS_TIMEOUT_S = 90
# The scenario's workload: 30 s of changes, the bootstrap's spark-submit (about 16 s here)
# started at 40% of them and, on a quiet machine, done before the workload holds at 90%.
SCENARIO_OPERATIONS = 3_000
SCENARIO_PACE = 100  # operations per second


@dataclass(frozen=True)
class Pipeline:
    """A broker whose topic holds the source's captured changes, and the cluster."""

    source_url: str
    broker: BrokerProcess
    cluster: StandaloneCluster
    records: int  # committed records of the topic: each change and each table's schema
    last_offset: int  # of the topic's last committed record
    work: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """The module's cluster (about 15 s to start), shared by its tests."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def pipeline(
    tmp_path_factory: pytest.TempPathFactory, cluster: StandaloneCluster
) -> Iterator[Pipeline]:
    """Captures a workload into the broker (module-wide: it takes a few seconds)."""
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
        capture = CaptureProcess(source_url, broker.bootstrap, TOPIC, work / "capture.log")
        try:
            ensure_topic(broker.bootstrap, TOPIC)
            assert capture.start(once=True).wait(120) == 0, (work / "capture.log").read_text()
            assert capture_drained(source_url, TOPIC)
            end = topic_end_offset(broker.bootstrap, TOPIC)
            wait_until(lambda: topic_end_offset(broker.bootstrap, TOPIC + ".full") >= end, 60,
                       "T.full caught up")  # fmt: skip
            last = last_record_offset(broker.bootstrap, TOPIC)
            records = len(read_topic(broker.bootstrap, TOPIC, schemas=True))
            assert records == changes + len(TABLE_NAMES)  # a schema per table, in the first batch
            yield Pipeline(source_url, broker, cluster, records, last, work)
        finally:
            capture.kill()
            broker.stop()


def test_the_pipeline_scenario_runs_on_the_cluster_as_in_local_mode(
    cluster: StandaloneCluster, tmp_path: Path, registry: Path
) -> None:
    """The experiment test_pipeline_spark.py runs in local mode (pipeline_scenario.py), with
    the apply job submitted to the cluster: a streaming query into DuckDB lives through the
    broker's kill -9 and restart and the capture's crash, and a destination bootstrapped
    from ``T.full`` mid-stream converges; source transactions rolled back by the
    application appear nowhere. Fewer changes than in local mode; each kill and the
    bootstrap still land while changes are being made (the scenario asserts it)."""
    # Two jobs side by side take both workers: this test runs before the worker is killed.
    assert cluster.alive_workers() == cluster.workers, cluster.logs()
    finished_before = len((cluster.master_status() or {}).get("completedapps", []))
    applier = ClusterApplier(cluster, tmp_path)
    try:
        run_scenario(applier, tmp_path, Scenario(
            source_url=f"sqlite:///{tmp_path}/source.db",
            destinations=[],  # --once runs of T: the tests below (a spark-submit is ~15 s)
            streamed=[f"duckdb:///{tmp_path}/dest.duckdb"],
            late_destination=f"sqlite:///{tmp_path}/late.db",
            operations=SCENARIO_OPERATIONS,
            per_second=SCENARIO_PACE,
            bootstrap_at=0.4,
        ))  # fmt: skip
    finally:
        applier.kill_all()

    def all_finished() -> bool:  # each submission was an application of the cluster
        finished = (cluster.master_status() or {}).get("completedapps", [])
        return len(finished) - finished_before == len(applier.submissions)

    wait_until(all_finished, 30, "the master listing the submitted applications as finished")
    assert len(applier.submissions) == 3  # the stream, the bootstrap and its catching up
    # Spark replayed nothing: the stream through the broker's restart, and the bootstrap's
    # second run from where its checkpoint left off (the sink would skip a replay unseen).
    reports = [report for submission in applier.submissions for report in submission.reports()]
    assert reports and all(report.skipped == 0 for report in reports), reports


def applied_offset(dest: str, topic: str = TOPIC) -> int:
    """The destination's stored next offset of ``topic`` (0 before its first batch)."""
    if not Path(dest.removeprefix("sqlite:///")).exists():
        return 0
    database = open_database(dest)
    try:
        return next_offset(database, topic, 0) if database.table_exists("kshim_apply_state") else 0
    finally:
        database.close()


def wait_for_progress(submission: Submission, dest: str, at_least: int, topic: str = TOPIC) -> int:
    """Waits until the destination holds changes of ``topic`` up to ``at_least``; returns
    its offset."""

    def progressed() -> bool:
        assert submission.process.poll() is None, submission.tail()
        return applied_offset(dest, topic) >= at_least

    wait_until(progressed, PROGRESS_TIMEOUT_S, f"apply up to offset {at_least}")
    return applied_offset(dest, topic)


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
        checkpoint = pipeline.work / f"checkpoint-{Path(dest).stem}"
        job = job_arguments(pipeline.broker.bootstrap, topic, dest, checkpoint, batch)
        started.append(Submission(pipeline.cluster, job, pipeline.work / f"{name}.log"))
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


def test_a_bootstrap_whose_driver_is_killed_resumes_from_its_destination(
    pipeline: Pipeline, submit: Callable[[str, str, str], Submission]
) -> None:
    """The driver dies when Spark has recorded a micro-batch in its checkpoint's commit log
    that the destination does not hold yet (its write in flight: pipelined.py), the moment
    where resuming from the checkpoint would lose that batch. The test holds the
    destination's write lock so that the moment comes and lasts. The resubmitted job must
    start where the destination left off: nothing skipped, nothing missing."""
    topic, dest = TOPIC + ".full", f"sqlite:///{pipeline.work}/dest-bootstrap.db"
    checkpoint = pipeline.work / f"checkpoint-{Path(dest).stem}"
    first = submit(topic, dest, "bootstrap")
    wait_for_progress(first, dest, at_least=1, topic=topic)
    with write_lock(dest) as applied:

        def recorded_not_written() -> bool:
            assert first.process.poll() is None, first.tail()
            return committed_start(checkpoint, topic) >= applied()

        wait_until(recorded_not_written, PROGRESS_TIMEOUT_S, "a batch recorded, not written")
        first.kill()
        held = applied()
    assert 0 < held <= pipeline.last_offset
    # The master lets the dead driver's executors go before the second one asks for cores.
    wait_until(lambda: pipeline.cluster.active_application() is None, 60, "the dead app gone")
    second = submit(topic, dest, "bootstrap-resubmitted")
    resumed = second.finish()
    assert_equal_and_complete(pipeline, dest, topic)
    # A run of its own (batch ids from 0), from the destination's offset: nothing replayed.
    assert [report.batch_id for report in resumed] == list(range(len(resumed)))
    assert resumed and all(report.skipped == 0 for report in resumed), resumed


@contextlib.contextmanager
def write_lock(dest: str) -> Iterator[Callable[[], int]]:
    """Holds the SQLite destination's write lock (BEGIN IMMEDIATE) until the block ends;
    yields a reader of its stored next offset of ``T.full``, through the same connection."""
    connection = sqlite3.connect(dest.removeprefix("sqlite:///"), isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")

        def applied() -> int:
            row = connection.execute(SELECT_NEXT_OFFSET, (TOPIC + ".full", 0)).fetchone()
            return int(row[0]) if row else 0

        yield applied
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def committed_start(checkpoint: Path, topic: str) -> int:
    """The start offset of the last micro-batch in the commit log of the run's checkpoint
    (job.run_checkpoint): the end of the batch before it, from that batch's offset log (its
    third line: the source's offsets as JSON); -1 before two commits. The destination holds
    none of that batch when its stored next offset is at most this: offsets in ``T.full``
    have gaps, so a batch's end offset may lie beyond its last record's."""
    runs = list(checkpoint.glob(f"{RUN_PREFIX}*"))
    if not runs:
        return -1
    [run] = runs
    committed = len(list((run / "commits").glob("[0-9]*")))
    if committed < 2:
        return -1
    lines = (run / "offsets" / str(committed - 2)).read_text().splitlines()
    return int(json.loads(lines[2])[topic]["0"])


def test_a_daemon_that_cannot_start_fails_the_start_with_its_log(tmp_path: Path) -> None:
    cluster = StandaloneCluster(tmp_path, worker_memory="plenty")  # not a Spark memory size
    with pytest.raises(ClusterError, match=r"worker-\d exited waiting for 2 ALIVE") as raised:
        cluster.start()
    assert "Usage: Worker" in str(raised.value)  # the worker's own words, from its log
    assert all(daemon.process is None for daemon in [cluster.master, *cluster.worker_daemons])
