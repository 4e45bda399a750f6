"""Reusable test helpers: run a real ``kshim serve`` process on a free loopback port (or
Apache Kafka from kshim.jvm's pinned jars, behind the same interface), and the fields of
requests that tests send raw (through ``kshim.client.wire``).

Used by kshim's own suites and benchmarks, and usable by anyone testing against kshim.
Every wait is bounded; only the process started here is ever signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

START_TIMEOUT_S = 20.0
METRICS_LISTEN = "kshim.metrics.listen"
# How often a starting broker's port is tried: a refused connection on loopback costs
# microseconds, and every step of this period is added to the measured start.
START_POLL_S = 0.005
LOG_TAIL_LINES = 20
# What a failure of the broker's own leaves in its log: a Python exception, a task whose
# exception nobody read, a panic or abort in kio's native codec, a line logged at ERROR.
ALARM_MARKER = "ALARM: "
FAILURE_MARKERS = (
    "Traceback",
    "Task exception was never retrieved",
    "panicked",
    "memory allocation of",
    " ERROR ",
    " CRITICAL ",
)
STOP_TIMEOUT_S = 20.0
# A JVM broker formats its storage and starts in 5-30 s; a loaded machine can take longer.
KAFKA_START_TIMEOUT_S = 120.0
KAFKA_PROBE_TIMEOUT_S = 2.0
CONSUMER_REPLICA_ID = -1  # a consumer, not a follower broker
NO_SESSION_EPOCH = -1  # a full fetch outside any fetch session (KIP-227)
NO_EPOCH = -1  # no leader epoch known, so none checked (KIP-320)
FETCH_MAX_BYTES = 1 << 20


def free_port() -> int:
    """Returns a loopback TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(host: str, port: int, timeout_s: float) -> None:
    """Returns once ``host:port`` accepts connections; raises TimeoutError."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout_s} s")


class BrokerExited(RuntimeError):
    """The broker process exited before it listened; the message holds its log's end."""


class BrokerProcess:
    """A ``kshim serve`` child process with its own data directory and port.

    ``start_timeout_s`` bounds each start; ``start_durations_s`` holds how long each start
    took, from spawning the process to its first accepted connection. Not thread-safe: one
    thread starts and stops a broker.
    """

    name = "kshim"

    def __init__(
        self,
        data_dir: str | Path,
        settings: Sequence[str] = (),
        port: int | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.data_dir = str(data_dir)
        self.settings = list(settings)
        self.port = port or free_port()
        self.start_timeout_s = start_timeout_s
        self.start_durations_s: list[float] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir + ".log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def started_in_s(self) -> float | None:
        """How long the last successful start took, or None before the first."""
        return self.start_durations_s[-1] if self.start_durations_s else None

    def start(self) -> BrokerProcess:
        """Starts the process and returns it once it accepts connections. Raises
        BrokerExited when the process exits first (a bad setting, a data directory in use)
        and TimeoutError after ``start_timeout_s``, both with the end of its log, having
        killed it."""
        started = time.perf_counter()
        log_file = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        self.process = subprocess.Popen(
            self.command(), stdout=log_file, stderr=subprocess.STDOUT, env=broker_environment()
        )
        log_file.close()
        try:
            self._wait_until_listening(self.process)
        except (BrokerExited, TimeoutError):
            self.kill()
            raise
        self.start_durations_s.append(time.perf_counter() - started)
        return self

    def command(self) -> list[str]:
        """The command line of the broker's process."""
        command = [sys.executable, "-m", "kshim", "serve", "--listen", self.bootstrap]
        command += ["--data-dir", self.data_dir]
        settings = self.settings
        if not any(setting.startswith(METRICS_LISTEN + "=") for setting in settings):
            # A test broker serves no metrics unless asked: the default port is one per
            # machine, and kshim serve refuses to start when it is taken.
            settings = [f"{METRICS_LISTEN}=", *settings]
        for setting in settings:
            command += ["--set", setting]
        return command

    def is_serving(self) -> bool:
        """Whether the broker is ready for clients: its port accepts a connection."""
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
        ):
            return True
        return False

    def _wait_until_listening(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrokerExited(
                    f"{self.name} exited with status {process.returncode} before listening on "
                    f"{self.bootstrap}; the end of {self.log_path}:\n{self.log_tail()}"
                )
            if self.is_serving():
                return
            time.sleep(START_POLL_S)
        raise TimeoutError(
            f"{self.name} did not listen on {self.bootstrap} within {self.start_timeout_s:g} s; "
            f"the end of {self.log_path}:\n{self.log_tail()}"
        )

    def restart(self) -> BrokerProcess:
        """Stops the broker cleanly if it runs (SIGTERM: what it acknowledged is on disk),
        then starts it again on the same port and data directory, so that clients keep
        their bootstrap; raises as ``start``."""
        self.stop()
        return self.start()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within the timeout."""
        stop_process(self.process)
        self.process = None

    def kill(self) -> None:
        """kill -9: no shutdown, no flush; what is on disk is what survives."""
        kill_process(self.process)
        self.process = None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        with (
            contextlib.suppress(OSError),
            open(self.log_path, encoding="utf-8", errors="replace") as handle,
        ):
            return handle.read()
        return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the broker's log."""
        return "\n".join(self.log_text().splitlines()[-lines:])


class KafkaProcess(BrokerProcess):
    """Apache Kafka as a single-node KRaft broker from kshim.jvm's pinned jars (``jars``: the
    artifact set, ``kafka`` or ``kafka4``), with BrokerProcess's interface: the same tests
    can start, kill and restart either. The child is ``python -m kshim.jvm kafka``, which
    execs the JVM, so its process is the broker's. Its storage is formatted on the first
    start only: a restart keeps the data directory's records and cluster id. ``settings``
    are broker properties (``KEY=VALUE``). The jars should be resolved beforehand
    (``kshim.jvm.artifacts.resolve``): a first start would otherwise include Maven's fetch.
    """

    name = "Apache Kafka"

    def __init__(
        self,
        data_dir: str | Path,
        settings: Sequence[str] = (),
        port: int | None = None,
        start_timeout_s: float = KAFKA_START_TIMEOUT_S,
        jars: str = "kafka",
    ) -> None:
        super().__init__(data_dir, settings, port, start_timeout_s)
        self.jars = jars

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "kshim.jvm", "kafka", "--jars", self.jars]
        command += ["--port", str(self.port), "--data-dir", self.data_dir]
        for setting in self.settings:
            command += ["--set", setting]
        return command

    def is_serving(self) -> bool:
        """Whether the broker answers ApiVersions: Kafka binds its port before its request
        handlers run, and the kernel accepts connections into the backlog meanwhile."""
        # Imported here: the pytest plugin loads this module in every run, and only a Kafka
        # needs the codecs.
        from kshim.client.frames import MalformedResponseError
        from kshim.client.wire import WireConnection
        from kshim.protocol.apis import API_VERSIONS_KEY

        try:
            with WireConnection("127.0.0.1", self.port, KAFKA_PROBE_TIMEOUT_S) as connection:
                connection.call(API_VERSIONS_KEY, 0)
        except (OSError, MalformedResponseError):
            return False
        return True


class GatewayProcess(BrokerProcess):
    """``kshim gateway`` relaying to ``upstream`` (host:port[,...]), with BrokerProcess's
    interface; ``log_dir`` holds its log. Upstream broker N is reached at
    ``broker_port_base + N``: a free port for ``node_id`` (kshim's node id and that of
    kshim.jvm's single-node Kafka, 1)."""

    name = "kshim gateway"

    def __init__(
        self, log_dir: str | Path, upstream: str, node_id: int = 1, options: Sequence[str] = ()
    ) -> None:
        """``options``: more of ``kshim gateway``'s command-line options."""
        super().__init__(Path(log_dir) / f"gateway-{free_port()}", ())
        self.upstream = upstream
        self.options = list(options)
        self.broker_port_base = free_port() - node_id

    def command(self) -> list[str]:
        base = str(self.broker_port_base)
        command = [sys.executable, "-m", "kshim", "gateway", "--upstream", self.upstream]
        return [*command, "--listen", self.bootstrap, "--broker-port-base", base, *self.options]


def broker_environment(environment: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment for a broker child: ``environment``, except that where it turns
    Python's bytecode cache off (PYTHONDONTWRITEBYTECODE, as many CI images and containers
    do) the child keeps its bytecode in kshim's cache directory instead (PYTHONPYCACHEPREFIX),
    still outside the source tree. Without a cache every start compiles kshim's 260 modules
    from source: about 0.4 s of CPU, most of a start."""
    child = dict(environment)
    if child.get("PYTHONDONTWRITEBYTECODE") and not child.get("PYTHONPYCACHEPREFIX"):
        del child["PYTHONDONTWRITEBYTECODE"]
        child["PYTHONPYCACHEPREFIX"] = os.path.join(_cache_home(child), "kshim", "pycache")
    return child


def _cache_home(environment: Mapping[str, str]) -> str:
    """$XDG_CACHE_HOME, else ~/.cache, else (no home directory) the temporary directory."""
    if environment.get("XDG_CACHE_HOME"):
        return environment["XDG_CACHE_HOME"]
    home = os.path.expanduser("~")
    return tempfile.gettempdir() if home == "~" else os.path.join(home, ".cache")


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM to a child this process started, then SIGKILL if it has not exited within
    the timeout; waits for it either way."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_process(process)


def kill_process(process: subprocess.Popen[bytes] | None) -> None:
    """kill -9 of a child this process started, as a crash would; waits for it."""
    if process is not None and process.poll() is None:
        process.kill()
        process.wait(STOP_TIMEOUT_S)


@contextlib.contextmanager
def running_broker(
    settings: Sequence[str] = (), data_dir: str | None = None
) -> Iterator[BrokerProcess]:
    """Runs a broker for the duration of the block, in a temporary data dir unless given."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = os.path.join(stack.enter_context(tempfile.TemporaryDirectory()), "data")
        broker = BrokerProcess(data_dir, settings).start()
        try:
            yield broker
        finally:
            broker.stop()


def fetch_fields(topic: str, partition: int, offset: int, max_wait_ms: int) -> dict[str, object]:
    """A consumer's Fetch of one partition from ``offset`` (kio field names, any version):
    answered as soon as one byte is there, or after ``max_wait_ms``, with up to 1 MiB."""
    return {
        "replica_id": CONSUMER_REPLICA_ID,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": FETCH_MAX_BYTES,
        "session_epoch": NO_SESSION_EPOCH,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": NO_EPOCH,
                        "fetch_offset": offset,
                        "last_fetched_epoch": NO_EPOCH,
                        "log_start_offset": -1,  # a follower's; none for a consumer
                        "partition_max_bytes": FETCH_MAX_BYTES,
                    }
                ],
            }
        ],
    }


def failure_lines(log: str, also: Sequence[str] = ()) -> list[str]:
    """The lines of a broker log that show a failure of the broker's own (FAILURE_MARKERS),
    or hold any of ``also``; empty for a clean log."""
    markers = (*FAILURE_MARKERS, *also)
    return [
        line
        for line in log.splitlines()
        if any(marker in line for marker in markers)
        # An alarm (a slow disk on a loaded test machine, a lagging group) reports the
        # broker's surroundings, not a failure of its own; ask for it with ``also``.
        and (ALARM_MARKER not in line or any(marker in line for marker in also))
    ]


class FakeClock:
    """Epoch milliseconds that move only when told: pass it as a broker's or a store's clock
    (STYLE.md: no real sleeps where a fake clock will do)."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, milliseconds: int) -> None:
        self.now_ms += milliseconds
