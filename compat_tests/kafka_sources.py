"""Where the Apache Kafka of the comparisons comes from, in this order of priority:

1. ``KSHIM_KAFKA_BOOTSTRAP=host:port``: a Kafka that is already running. Used as it is,
   never started or stopped here; scenarios give their topics unique names and assume
   nothing about what else the cluster holds.
2. ``KSHIM_KAFKA_CMD``: a shell command that starts one, with ``{port}`` and ``{data_dir}``
   placeholders (a free loopback port and a fresh, empty directory). It runs as a process
   group of its own; ready once the port answers ApiVersions, and at the end the group is
   sent SIGTERM (SIGKILL after a timeout) by its id, the PID of the shell started here.
3. Otherwise Apache Kafka 3.9 from the jars Maven Central serves (``kshim.jvm``): the same
   kind of started command, ``python -m kshim.jvm kafka``, whose jars are fetched into the
   cache before it starts (so the start timeout does not include a cold Maven).
4. Without Maven or Java (and nothing cached), testcontainers, when a Docker daemon answers
   (compat_tests/brokers.py).

The compatibility suite (compat_tests/brokers.py) and the benchmark runner
(benchmarks/brokers.py) both start their Kafka through this module, so they compare the
same broker. Linux only for the command's process group (read from /proc).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kshim.client.frames import MalformedResponseError, encode_request
from kshim.client.wire import WireConnection, parse_bootstrap
from kshim.jvm import artifacts
from kshim.protocol.apis import API_VERSIONS_KEY
from kshim.testing import free_port

KAFKA_IMAGE = "confluentinc/cp-kafka:7.9.0"  # Apache Kafka 3.9, KRaft capable
BOOTSTRAP_VARIABLE = "KSHIM_KAFKA_BOOTSTRAP"
COMMAND_VARIABLE = "KSHIM_KAFKA_CMD"
BOOTSTRAP, COMMAND, JARS, CONTAINER = "bootstrap", "command", "jars", "container"
# The artifact set (kshim/jvm/poms) of the reference Kafka; the benchmarks add kafka4.
REFERENCE_JARS = "kafka"
PORT_PLACEHOLDER, DATA_DIR_PLACEHOLDER = "{port}", "{data_dir}"
# A JVM broker formats its storage and starts in 5-30 s; a cold machine can take longer.
COMMAND_START_TIMEOUT_S = 120.0
COMMAND_STOP_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 2.0
POLL_INTERVAL_S = 0.05
LOG_TAIL_LINES = 20
API_VERSIONS_V0 = encode_request(API_VERSIONS_KEY, 0, 1, {}, client_id="kshim-compat-probe")


@dataclass(frozen=True, slots=True)
class KafkaSource:
    """How Kafka is had: ``kind`` is bootstrap, command, jars or container; ``value`` the
    address, the command template or the artifact set's name ("" for the container)."""

    kind: str
    value: str = ""

    @property
    def external(self) -> bool:
        """True for a Kafka this process neither starts nor stops."""
        return self.kind == BOOTSTRAP

    def describe(self) -> str:
        """One line for reports: which Kafka the results are from."""
        if self.kind == BOOTSTRAP:
            return f"the already running Kafka at {self.value} ({BOOTSTRAP_VARIABLE})"
        if self.kind == COMMAND:
            return f"a Kafka started by {COMMAND_VARIABLE} (`{self.value}`)"
        if self.kind == JARS:
            coordinate = artifacts.artifact_set(self.value).coordinates()[0]
            return f"Apache Kafka `{coordinate}` from Maven Central, single-node KRaft"
        return f"Apache Kafka 3.9 ({KAFKA_IMAGE}) in KRaft mode through testcontainers"

    @property
    def started_here(self) -> bool:
        """True for a Kafka this process starts from a command (its own or the jars')."""
        return self.kind in (COMMAND, JARS)

    def command_template(self) -> str:
        """The command that starts it (COMMAND and JARS), fetching the jars first for JARS."""
        if self.kind == JARS:
            artifacts.resolve(self.value)
            return jars_command(self.value)
        return self.value


def kafka_source(environment: Mapping[str, str] | None = None) -> KafkaSource:
    """The source the environment asks for (os.environ when None); a blank variable counts
    as unset. Raises ValueError for a bootstrap that is not host:port or a command without
    the {port} placeholder (it could not be told where to listen)."""
    variables = os.environ if environment is None else environment
    address = variables.get(BOOTSTRAP_VARIABLE, "").strip()
    if address:
        parse_bootstrap(address)
        return KafkaSource(BOOTSTRAP, address)
    command = variables.get(COMMAND_VARIABLE, "").strip()
    if command:
        if PORT_PLACEHOLDER not in command:
            raise ValueError(f"{COMMAND_VARIABLE} must contain {PORT_PLACEHOLDER}: {command!r}")
        return KafkaSource(COMMAND, command)
    if artifacts.unavailable_reason(REFERENCE_JARS) is None:
        return KafkaSource(JARS, REFERENCE_JARS)
    return KafkaSource(CONTAINER)


def jars_command(jars: str, settings: Mapping[str, str] | None = None) -> str:
    """The command template that runs Kafka from the artifact set ``jars`` (kshim.jvm),
    with broker ``settings`` on top of its sample configuration. The shell ``exec``s it (and
    it ``exec``s the JVM), so the process group is the JVM alone: nothing else is measured
    or left behind."""
    extra = "".join(f" --set {shlex.quote(f'{k}={v}')}" for k, v in (settings or {}).items())
    return (
        f"exec {shlex.quote(sys.executable)} -m kshim.jvm kafka --jars {shlex.quote(jars)} "
        f"--port {PORT_PLACEHOLDER} --data-dir {DATA_DIR_PLACEHOLDER}{extra}"
    )


def answers_api_versions(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when ``host:port`` answers an ApiVersions v0 request with a frame."""
    try:
        with WireConnection(host, port, timeout_s) as connection:
            connection.send(API_VERSIONS_V0)
            connection.read_frame()
    except (OSError, MalformedResponseError):
        return False
    return True


def bootstrap_unavailable_reason(address: str) -> str | None:
    """Why the Kafka at ``address`` cannot be used (it does not answer), or None."""
    host, port = parse_bootstrap(address)
    if answers_api_versions(host, port):
        return None
    return f"{BOOTSTRAP_VARIABLE}={address} does not answer ApiVersions"


def command_line(template: str, port: int, data_dir: str) -> str:
    """The template with its placeholders filled (plain replacement: other braces, as in a
    shell's ``${VAR}``, are left alone)."""
    return template.replace(PORT_PLACEHOLDER, str(port)).replace(DATA_DIR_PLACEHOLDER, data_dir)


@dataclass
class LaunchedKafka:
    """A Kafka started from the command: its shell (the process group's leader), where it
    listens, its data directory and the seconds from launch to the first ApiVersions answer."""

    process: subprocess.Popen[bytes]
    port: int
    data_dir: str
    ready_s: float
    log_path: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process_group(self) -> int:
        return self.process.pid

    def pids(self) -> list[int]:
        """The live (not zombie) processes of its group: the broker, however the command
        started it (a script's child, or one left running after the script exited)."""
        return group_members(self.process_group)


@contextlib.contextmanager
def launched(template: str, timeout_s: float = COMMAND_START_TIMEOUT_S) -> Iterator[LaunchedKafka]:
    """Runs ``template`` (see the module's docstring) until the block ends, then stops its
    process group. Raises RuntimeError (with the tail of its output) when the command exits
    or stays silent before the port answers ApiVersions."""
    with tempfile.TemporaryDirectory(prefix="kshim-kafka-cmd-") as directory:
        data_dir = os.path.join(directory, "data")
        os.mkdir(data_dir)
        log_path = os.path.join(directory, "output.log")
        port = free_port()
        started = time.perf_counter()
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                ["/bin/sh", "-c", command_line(template, port, data_dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as one below
            )
        try:
            ready_s = wait_until_answering(process, port, started, timeout_s, log_path)
            yield LaunchedKafka(process, port, data_dir, ready_s, log_path)
        finally:
            stop_group(process)


def wait_until_answering(
    process: subprocess.Popen[bytes], port: int, started: float, timeout_s: float, log_path: str
) -> float:
    """Seconds from ``started`` until 127.0.0.1:``port`` answers ApiVersions; raises
    RuntimeError when the whole group has exited first, or nothing answers in time."""
    while time.perf_counter() - started < timeout_s:
        if answers_api_versions("127.0.0.1", port, PROBE_TIMEOUT_S):
            return time.perf_counter() - started
        if not group_members(process.pid):  # a script that started a daemon may exit
            raise RuntimeError(f"{COMMAND_VARIABLE} exited before answering{log_tail(log_path)}")
        time.sleep(POLL_INTERVAL_S)
    raise RuntimeError(
        f"{COMMAND_VARIABLE}: nothing answered ApiVersions on port {port} after "
        f"{timeout_s:.0f} s{log_tail(log_path)}"
    )


def log_tail(log_path: str) -> str:
    """The last lines the command printed, for an error message ("" when it printed none)."""
    with contextlib.suppress(OSError):
        lines = Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines()
        if lines:
            return "; its output ended with:\n" + "\n".join(lines[-LOG_TAIL_LINES:])
    return ""


def group_members(process_group: int) -> list[int]:
    """The live processes whose process group is ``process_group``, from /proc (zombies,
    which hold no resources, left out)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # Fields after the command name (which may hold spaces and parentheses).
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            state, group = fields[0], int(fields[2])
            if group == process_group and state != "Z":
                members.append(int(entry.name))
    return members


def stop_group(process: subprocess.Popen[bytes], timeout_s: float = COMMAND_STOP_TIMEOUT_S) -> None:
    """SIGTERM to the process group led by ``process``, SIGKILL to what is left of it after
    ``timeout_s``; then reaps the leader. The leader is reaped last on purpose: until then its
    PID, which is the group's id, cannot be given to another process, so only the group
    started here is ever signalled."""
    group = process.pid
    for stop_signal in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, stop_signal)
        deadline = time.monotonic() + timeout_s
        while group_members(group) and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
        if not group_members(group):
            break
    process.wait(timeout_s)
