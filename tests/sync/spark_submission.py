"""The apply job submitted to a Spark standalone cluster with ``spark-submit``, as a user runs it.

``Submission`` is one ``spark-submit`` in a process group of its own, its output (the
driver's per-batch reports among it) in a log file. ``ClusterApplier`` runs the pipeline
scenario's apply job (tests/sync/pipeline_scenario.py) that way: ``--once`` runs that wait
for their exit status, and streaming queries stopped with SIGTERM once they have applied
what the test waits for.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spark_examples.apply.job import DEFAULT_MAX_OFFSETS_PER_TRIGGER
from spark_examples.cluster import StandaloneCluster, spark_environment, submit_command
from spark_examples.spark_session import connector_jars
from spark_examples.testing import REPOSITORY_ROOT
from tests.sync.pipeline_scenario import source_offsets_logged

SUBMIT_TIMEOUT_S = 150
STOP_TIMEOUT_S = 30
REPORT = re.compile(r"^batch (\d+): (\d+) applied, (\d+) already applied, up to offset (\d+)", re.M)
# Each application takes one core, one worker's: a streaming query and a --once run (or a
# bootstrap) share the two-worker cluster side by side, as two jobs of one team would; left
# unlimited, the first application takes every core and the second waits for it to end.
SHARED_CLUSTER_SETTINGS = ("spark.cores.max=1",)


@dataclass(frozen=True)
class BatchReport:
    batch_id: int
    applied: int
    skipped: int
    up_to_offset: int


def job_arguments(
    bootstrap: str, topic: str, dest: str, checkpoint: Path, batch: int | None = None
) -> list[str]:
    """The apply job's command line; ``--once`` with micro-batches of ``batch`` offsets, or
    a streaming query (the job's default trigger and batch size) when ``batch`` is None."""
    job = ["--bootstrap", bootstrap, "--topic", topic, "--dest", dest,
           "--checkpoint", str(checkpoint)]  # fmt: skip
    if batch is not None:
        job += ["--once", "--max-offsets-per-trigger", str(batch)]
    return job


class Submission:
    """One ``spark-submit`` of the apply job, in a process group of its own (the JVM and the
    Python driver it starts), its output in a log file."""

    def __init__(
        self,
        cluster: StandaloneCluster,
        job: Sequence[str],
        log_path: Path,
        settings: Sequence[str] = (),
    ) -> None:
        jars = connector_jars()
        assert jars is not None  # spark_marks skips the modules using this without them
        self.command = submit_command(cluster.master_url, jars, job, settings=settings)
        self.log_path = log_path
        environment = spark_environment(cluster.work_dir)
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
        self.process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM to the driver's process group (Spark's shutdown hook ends the
        application), then SIGKILL if it has not exited in time."""
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def reports(self) -> list[BatchReport]:
        text = self.log_path.read_text(errors="replace")
        return [BatchReport(*map(int, found)) for found in REPORT.findall(text)]

    def tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-40:])


@dataclass
class ClusterStream:
    """A streaming apply query whose driver is a ``spark-submit`` of its own."""

    submission: Submission
    checkpoint: Path

    def reading(self) -> bool:
        assert self.submission.process.poll() is None, self.submission.tail()
        return source_offsets_logged(self.checkpoint)

    def applied_through(self, offset: int) -> bool:
        """From the driver's reports: a batch up to ``offset`` or beyond was applied."""
        assert self.submission.process.poll() is None, self.submission.tail()
        return any(report.up_to_offset >= offset for report in self.submission.reports())

    def stop(self) -> None:
        self.submission.stop()


@dataclass
class ClusterApplier:
    """The apply job submitted to ``cluster``; logs in ``work`` (``submit-N.log``)."""

    cluster: StandaloneCluster
    work: Path
    submissions: list[Submission] = field(default_factory=list)

    def submit(self, job: Sequence[str]) -> Submission:
        log_path = self.work / f"submit-{len(self.submissions)}.log"
        self.submissions.append(Submission(self.cluster, job, log_path, SHARED_CLUSTER_SETTINGS))
        return self.submissions[-1]

    def apply_once(self, bootstrap: str, topic: str, dest: str, checkpoint: Path) -> None:
        # The job's default batch size: the scenario's kills are not aimed at micro-batches.
        job = job_arguments(bootstrap, topic, dest, checkpoint, DEFAULT_MAX_OFFSETS_PER_TRIGGER)
        self.submit(job).finish()

    def start_stream(
        self, bootstrap: str, topic: str, dest: str, checkpoint: Path
    ) -> ClusterStream:
        job = job_arguments(bootstrap, topic, dest, checkpoint)
        return ClusterStream(self.submit(job), checkpoint)

    def kill_all(self) -> None:
        """Kills whatever submission is still running (a test that failed half-way)."""
        for submission in self.submissions:
            submission.kill()
