"""A Spark standalone cluster on this machine, from pyspark's own distribution.

    python -m spark_examples.cluster [--workers 2] [--work-dir DIR]

starts a master and workers as local processes, all on 127.0.0.1, prints the master's URL
and a ``spark-submit`` command for the apply job, and runs until interrupted. Spark's
standalone mode (https://spark.apache.org/docs/4.0.0/spark-standalone.html) is started here
by hand, as its "Starting a Cluster Manually" section does, with pyspark's ``bin/spark-class``:

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port W
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P --host 127.0.0.1 \
        --cores 1 --memory 1g --work-dir DIR --webui-port W2

``StandaloneCluster`` does the same for tests: free loopback ports, a wait (bounded) until
every worker is registered ALIVE in the master's JSON status, logs in the work directory, and
signals only to the process groups it started. Each daemon gets a process group of its own,
which also holds the executors its worker launches, so killing a worker's group is the loss
of a machine: the worker and its executors at once.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kshim.testing import free_port

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The heap of the master and worker daemons themselves (spark-class reads it for them); they
# only keep the cluster's state, and Spark's default of 1g each is a lot on a small machine.
DAEMON_MEMORY = "256m"
# Short-lived JVMs on a small machine: the client compiler alone (C2's compile threads cost
# more CPU than they win back in a run of a minute) and the serial collector (no parallel GC
# threads competing for the same cores). HotSpot's options:
# https://docs.oracle.com/en/java/javase/17/docs/specs/man/java.html
SMALL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
POLL_S = 0.2
LOG_TAIL_LINES = 30
APPLY_SCRIPT = Path(__file__).resolve().parent / "apply" / "spark_submit.py"


class ClusterError(RuntimeError):
    """A daemon exited or the cluster did not come up in time; the message has its logs."""


def spark_home() -> Path:
    """Returns pyspark's installation directory, a Spark distribution with bin/spark-class.

    Raises ClusterError when pyspark is not installed.
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("pyspark is not installed: it carries the Spark distribution")
    return Path(spec.origin).parent


def spark_environment(work_dir: Path) -> dict[str, str]:
    """The environment of the daemons and of spark-submit: loopback only, scratch space in
    ``work_dir``, and this interpreter for any Python worker."""
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(work_dir / "local"),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_DAEMON_JAVA_OPTS": SMALL_JVM_OPTIONS,
        "PYSPARK_PYTHON": sys.executable,
    }


@dataclass
class Daemon:
    """One master or worker process, the leader of its own process group."""

    name: str
    command: list[str]
    log_path: Path
    web_port: int
    process: subprocess.Popen[bytes] | None = None  # None again once killed or stopped

    def start(self, environment: dict[str, str]) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.process = subprocess.Popen(
            self.command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,  # its own group: its executors die with it
        )
        log.close()

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exited(self) -> bool:
        """Whether it ended without being told to (a bad setting, a port taken, a crash)."""
        return self.process is not None and self.process.poll() is not None

    def signal_group(self, signal_number: int) -> None:
        """Signals the group this daemon leads (it and the executors it launched)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal_number)

    def kill(self) -> None:
        """SIGKILL to the whole group, as a crashed machine; waits for the daemon."""
        if self.process is not None:
            self.signal_group(signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT_S)
            self.process = None

    def stop(self) -> None:
        """SIGTERM to the group; once the daemon exits (or the timeout passes), SIGKILL to
        whatever is left of the group."""
        if self.process is None:
            return
        self.signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_TIMEOUT_S)
        self.signal_group(signal.SIGKILL)  # executors that outlived their worker, too
        self.process.wait(STOP_TIMEOUT_S)
        self.process = None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if not self.log_path.exists():
            return f"[{self.name}: no log]"
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join([f"[{self.name}: {self.log_path}]", *text])


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers of ``worker_cores`` cores and ``worker_memory`` each.

    ``work_dir`` holds the logs (``master.log``, ``worker-N.log``) and each worker's work
    directory (``worker-N/``, where executors write their own stdout and stderr). Not
    thread-safe: one thread starts and stops a cluster.
    """

    work_dir: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    start_timeout_s: float = START_TIMEOUT_S
    master_port: int = field(default_factory=free_port)
    master_web_port: int = field(default_factory=free_port)
    master: Daemon = field(init=False)
    worker_daemons: list[Daemon] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.work_dir = Path(self.work_dir)
        self.master = Daemon(
            "master",
            [*self._spark_class(MASTER_CLASS), "--host", HOST, "--port", str(self.master_port),
             "--webui-port", str(self.master_web_port)],
            self.work_dir / "master.log",
            self.master_web_port,
        )  # fmt: skip

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def master_web_url(self) -> str:
        return f"http://{HOST}:{self.master_web_port}"

    def _spark_class(self, main_class: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main_class]

    def _new_worker(self, index: int) -> Daemon:
        directory = self.work_dir / f"worker-{index}"
        directory.mkdir(parents=True, exist_ok=True)
        web_port = free_port()
        return Daemon(
            f"worker-{index}",
            [*self._spark_class(WORKER_CLASS), self.master_url, "--host", HOST,
             "--cores", str(self.worker_cores), "--memory", self.worker_memory,
             "--work-dir", str(directory), "--webui-port", str(web_port)],
            self.work_dir / f"worker-{index}.log",
            web_port,
        )  # fmt: skip

    def start(self) -> StandaloneCluster:
        """Starts the master, then the workers; returns once all are ALIVE at the master.

        Raises ClusterError, with the daemons' logs and having stopped them, when one exits
        or ``start_timeout_s`` passes first.
        """
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "local").mkdir(exist_ok=True)
        try:
            self.master.start(spark_environment(self.work_dir))
            self._wait_for(lambda: self.master_status() is not None, "the master's status page")
            for index in range(self.workers):
                self.worker_daemons.append(self._new_worker(index))
                self.worker_daemons[-1].start(spark_environment(self.work_dir))
            self.wait_for_alive_workers(self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def kill_worker(self, index: int) -> None:
        """SIGKILL to worker ``index`` and its executors, as a lost machine."""
        self.worker_daemons[index].kill()

    def stop(self) -> None:
        """Stops the workers, then the master (each by its process group)."""
        for daemon in [*self.worker_daemons, self.master]:
            daemon.stop()

    def master_status(self) -> dict[str, Any] | None:
        """The master's JSON status (``/json/``: workers, applications), None if unreachable."""
        return _get_json(f"{self.master_web_url}/json/")

    def alive_workers(self) -> int:
        """How many workers the master has registered as ALIVE (0 if it cannot be asked)."""
        status = self.master_status() or {}
        return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")

    def wait_for_alive_workers(self, count: int) -> None:
        """Waits until exactly ``count`` workers are ALIVE; raises ClusterError on timeout."""
        self._wait_for(lambda: self.alive_workers() == count, f"{count} ALIVE worker(s)")

    def _wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not condition():
            exited = [d.name for d in [self.master, *self.worker_daemons] if d.exited()]
            if exited:
                raise ClusterError(f"{', '.join(exited)} exited waiting for {what}\n{self.logs()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"no {what} after {self.start_timeout_s:.0f} s\n{self.logs()}")
            time.sleep(POLL_S)

    def logs(self) -> str:
        """The end of every daemon's log, for a failure message."""
        return "\n".join(daemon.log_tail() for daemon in [self.master, *self.worker_daemons])

    def active_application(self) -> str | None:
        """The id of the application running on the cluster, None if there is none."""
        applications = (self.master_status() or {}).get("activeapps", [])
        return str(applications[0]["id"]) if applications else None

    def tasks_run(self, index: int, application: str) -> int:
        """How many tasks of ``application`` the executors of worker ``index`` have started,
        from their stderr files in the worker's work directory (``APP/EXECUTOR/stderr``;
        Spark's Executor logs "Running task" at INFO for each)."""
        directory = self.work_dir / f"worker-{index}" / application
        return sum(
            path.read_text(errors="replace").count("Running task ")
            for path in directory.glob("*/stderr")
        )


def _get_json(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            status: dict[str, Any] = json.load(response)
            return status
    except (urllib.error.URLError, OSError, ValueError):
        return None


@contextlib.contextmanager
def running_cluster(work_dir: Path | None = None, workers: int = 2) -> Iterator[StandaloneCluster]:
    """Runs a cluster for the duration of the block, in a temporary directory unless given."""
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="spark-")))
        cluster = StandaloneCluster(work_dir, workers=workers).start()
        try:
            yield cluster
        finally:
            cluster.stop()


def submit_command(
    master_url: str,
    jars: Sequence[str],
    job_arguments: Sequence[str],
    script: Path = APPLY_SCRIPT,
    settings: Sequence[str] = (),
) -> list[str]:
    """The ``spark-submit`` command line of the apply job (``script``) on ``master_url``.

    The driver binds to loopback and gets 1 GB, each executor 512 MB (within a 1g worker);
    ``settings`` are more ``KEY=VALUE`` Spark settings.
    """
    small = [
        "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
        "spark.ui.showConsoleProgress=false", "spark.sql.shuffle.partitions=2",
        f"spark.pyspark.python={sys.executable}",
        f"spark.driver.extraJavaOptions={SMALL_JVM_OPTIONS}",
        f"spark.executor.extraJavaOptions={SMALL_JVM_OPTIONS}", *settings,
    ]  # fmt: skip
    return [
        str(spark_home() / "bin" / "spark-submit"), "--master", master_url,
        "--driver-memory", "1g", "--executor-memory", "512m", "--jars", ",".join(jars),
        *(part for setting in small for part in ("--conf", setting)),
        str(script), *job_arguments,
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Starts a cluster, prints its master URL and how to submit to it, runs until ^C."""
    parser = argparse.ArgumentParser(
        prog="python -m spark_examples.cluster", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work-dir", type=Path, help="logs and work (default: a temp dir)")
    arguments = parser.parse_args(argv)
    from spark_examples.spark_session import cached_set_jars

    # ^C, and also a plain kill or a shell that started it in the background (where SIGINT is
    # ignored), end the block below, which stops the daemons: they run in sessions of their
    # own and would outlive this process.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    with running_cluster(arguments.work_dir, arguments.workers) as cluster:
        jars = cached_set_jars() or ["<the connector's four jars: python -m kshim.jvm fetch spark>"]
        job = ["--bootstrap", "HOST:PORT", "--topic", "T", "--dest", "URL", "--checkpoint", "DIR"]
        print(f"master: {cluster.master_url} (status: {cluster.master_web_url})")
        print(f"logs: {cluster.work_dir}")
        print("apply job: " + shlex.join(submit_command(cluster.master_url, jars, job)))
        print("^C stops the cluster", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while cluster.master.is_running():
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
