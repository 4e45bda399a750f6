"""Apache Kafka from the pinned jars, as a single-node KRaft broker in a plain JVM process.

    python -m kshim.jvm kafka --port 9092 --data-dir /tmp/kafka [--jars kafka4] [--set K=V]

What Kafka's own ``bin/kafka-storage.sh format`` and ``bin/kafka-server-start.sh`` would do
with its sample ``config/kraft/server.properties``, without an unpacked distribution: the
broker's configuration is that sample's (combined broker and controller, node 1, internal
topics with replication factor 1) with this port, a controller port of its own and the data
directory filled in, then ``--set`` entries on top (``log.flush.interval.messages=1`` for
the benchmarks' durable column). The storage is formatted with a fresh cluster id, unless
the data directory was formatted before (a restart keeps its data), and this process then
becomes the JVM (``exec``), so its PID and process group are the broker's and a signal to
them stops Kafka itself. The JVM options are the start scripts' defaults (1 GiB heap, G1
with 20 ms pauses), ``KAFKA_HEAP_OPTS`` overriding the heap as there.
"""

from __future__ import annotations

import base64
import os
import shlex
import socket
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from kshim.jvm.artifacts import JvmArtifactsError, resolve

LOOPBACK = "127.0.0.1"
# config/kraft/server.properties of Kafka 3.9 (and config/server.properties of Kafka 4),
# without the listeners and directories, which depend on the run.
SAMPLE_SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
}
# kafka-server-start.sh's heap and kafka-run-class.sh's performance options.
DEFAULT_HEAP_OPTIONS = "-Xmx1G -Xms1G"
FORMAT_HEAP = ("-Xmx256M",)
PERFORMANCE_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
FORMAT_TIMEOUT_S = 120.0
META_PROPERTIES = "meta.properties"  # what the format tool writes into each log directory
# Warnings and the line saying the broker started, to the process's output (the launcher
# of a test or benchmark keeps it in a file): log4j 1 (reload4j, Kafka 3) and log4j 2
# (Kafka 4) spell the same thing differently.
LOG4J1_SETTINGS = """\
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaRaftServer=INFO
"""
LOG4J2_SETTINGS = """\
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def server_properties(
    port: int,
    controller_port: int,
    log_dir: Path,
    overrides: Mapping[str, str],
    extra_listeners: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """The broker's configuration: the sample's, this run's addresses, then ``overrides``.
    ``extra_listeners`` (security protocol name to port, e.g. ``{"SASL_SSL": 9093}``) are
    listeners beside PLAINTEXT, each named after its protocol, as Kafka's default
    listener.security.protocol.map names them; their TLS and SASL settings are overrides."""
    ports = {"PLAINTEXT": port, **(extra_listeners or {})}
    addresses = [f"{name}://{LOOPBACK}:{number}" for name, number in ports.items()]
    protocols = ["CONTROLLER:PLAINTEXT", *(f"{name}:{name}" for name in ports)]
    return {
        **SAMPLE_SETTINGS,
        "listener.security.protocol.map": ",".join(protocols),
        "controller.quorum.voters": f"1@{LOOPBACK}:{controller_port}",
        "listeners": ",".join([*addresses, f"CONTROLLER://{LOOPBACK}:{controller_port}"]),
        "advertised.listeners": ",".join(addresses),
        "log.dirs": str(log_dir),
        **overrides,
    }


def properties_text(settings: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def random_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid().toString()`` makes one: 16 random bytes,
    base64url without padding, never starting with '-' (which a command line would take
    for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


def logging_options(jars: Sequence[Path], data_dir: Path) -> list[str]:
    """The JVM option that points the broker's logging backend at a settings file of ours."""
    if any(jar.name.startswith("reload4j-") for jar in jars):
        path = data_dir / "log4j.properties"
        path.write_text(LOG4J1_SETTINGS, encoding="utf-8")
        return [f"-Dlog4j.configuration=file:{path}"]
    path = data_dir / "log4j2.properties"
    path.write_text(LOG4J2_SETTINGS, encoding="utf-8")
    return [f"-Dlog4j2.configurationFile={path}"]


def broker_heap() -> list[str]:
    return shlex.split(os.environ.get("KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTIONS))


def java_command(
    classpath: str,
    main: str,
    arguments: Sequence[str],
    options: Sequence[str],
    heap: Sequence[str],
) -> list[str]:
    return ["java", *heap, *PERFORMANCE_OPTIONS, *options, "-cp", classpath, main, *arguments]


def prepare(
    port: int,
    data_dir: Path,
    jars_name: str,
    overrides: Mapping[str, str],
    extra_listeners: Mapping[str, int] | None = None,
) -> list[str]:
    """Writes the configuration into ``data_dir``, formats the storage unless it was formatted
    before, and returns the command that runs the broker. Raises JvmArtifactsError when the
    jars cannot be had, and RuntimeError with the tool's output when formatting fails."""
    jars = resolve(jars_name)
    classpath = os.pathsep.join(str(jar) for jar in jars)
    data_dir.mkdir(parents=True, exist_ok=True)
    log_dir = data_dir / "logs"
    settings = server_properties(port, free_port(), log_dir, overrides, extra_listeners)
    properties = data_dir / "server.properties"
    properties.write_text(properties_text(settings), encoding="utf-8")
    options = logging_options(jars, data_dir)
    # A restart on the same directory keeps its records and cluster id: the format tool
    # refuses a formatted directory under a new id, and the broker would refuse it too.
    if not (log_dir / META_PROPERTIES).is_file():
        format_storage(classpath, properties, options)
    return java_command(classpath, BROKER_MAIN, [str(properties)], options, broker_heap())


def format_storage(classpath: str, properties: Path, options: Sequence[str]) -> None:
    """``kafka-storage.sh format`` with a fresh cluster id; raises RuntimeError with the
    tool's output when it fails."""
    format_arguments = ["format", "-t", random_cluster_id(), "-c", str(properties)]
    # The format tool needs no 1 GiB heap: a small one starts faster.
    formatting = java_command(classpath, STORAGE_TOOL_MAIN, format_arguments, options, FORMAT_HEAP)
    finished = subprocess.run(
        formatting, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S, check=False
    )
    if finished.returncode != 0:
        raise RuntimeError(f"formatting Kafka's storage failed: {finished.stdout}{finished.stderr}")


def run(  # noqa: RET503 (os.execvp does not return)
    port: int,
    data_dir: Path,
    jars_name: str,
    overrides: Mapping[str, str],
    extra_listeners: Mapping[str, int] | None = None,
) -> int:
    """Prepares the broker, then replaces this process with it (returns only on error)."""
    try:
        command = prepare(port, data_dir, jars_name, overrides, extra_listeners)
    except (JvmArtifactsError, RuntimeError) as error:
        print(f"kafka: error: {error}", flush=True)
        return 1
    os.execvp(command[0], command)
