"""One Kafka Connect worker in distributed mode against a Kafka broker (kshim, or Apache
Kafka itself): its properties, its logging and its java command.

The properties are those of Kafka's ``config/connect-distributed.properties`` that a
single-node broker needs changed: the three internal topics with replication factor 1 (kshim,
like a single-node Kafka, has one replica of everything), JsonConverter for keys and values,
and a REST listener on a given port. Workers with the same ``group.id`` and topics form one
Connect cluster through the broker's group coordinator (the ``connect`` protocol,
``sessioned``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from examples.connect.classpath import classpath

CONNECT_MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
DEFAULT_GROUP_ID = "kshim-connect"
# Kafka's default (60 s) replays up to a minute of changes after a crash of an at-least-once
# worker; 10 s bounds that. Exactly-once tasks commit offsets with their transactions instead.
DEFAULT_OFFSET_FLUSH_INTERVAL_MS = 10_000
# How long Connect waits for a stopping task before abandoning it (Kafka's default: 5 s). A
# Debezium 3.2 task's stop first reads its stored offsets, to acknowledge them to the
# database; a task abandoned while blocked on an unreachable broker finds the offset reader
# closed, its stop fails before it closes its replication connection, and the slot stays
# taken: the task's next instance in the same worker cannot stream. 60 s is the producer's
# max.block.ms, which bounds every blocking call of the task to its transactional producer.
# The cost: a task slow to stop holds the worker's herder, and REST writes, that long (an
# exactly-once task stopped while it starts, waiting for the herder to confirm its
# generation, does so every time).
TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS = 60_000
HEAP_OPTIONS = ("-Xms128m", "-Xmx1g")  # as connect-distributed.sh, with a smaller floor

# Connect 3.9 logs through slf4j-reload4j, that is log4j 1 (the connect set's POM pins it, as
# Kafka's distribution ships it): a configuration in the format of Kafka's
# config/connect-log4j.properties, named by -Dlog4j.configuration as bin/connect-distributed.sh
# does. %X{connector.context} is the "[name|task-0] " that Connect puts in the MDC.
LOG4J_PROPERTIES = """\
# Written by examples/connect/worker.py: INFO to standard output, without the
# configuration dump that each of the worker's clients prints when it starts.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %X{connector.context}%m (%c)%n
log4j.logger.org.apache.kafka.clients.admin.AdminClientConfig=WARN
log4j.logger.org.apache.kafka.clients.consumer.ConsumerConfig=WARN
log4j.logger.org.apache.kafka.clients.producer.ProducerConfig=WARN
log4j.logger.org.reflections=WARN
"""


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """What differs between workers and clusters; everything else is fixed here."""

    bootstrap: str
    rest_port: int
    group_id: str = DEFAULT_GROUP_ID
    rest_host: str = "127.0.0.1"
    schemas: bool = True  # JsonConverter's schemas.enable, for keys and values
    exactly_once: bool = False  # exactly.once.source.support=enabled (KIP-618)
    overrides: Mapping[str, str] = field(default_factory=dict)  # any worker property

    def properties(self) -> dict[str, str]:
        """The worker's properties; ``overrides`` win."""
        schemas = "true" if self.schemas else "false"
        properties = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "config.storage.topic": f"{self.group_id}-configs",
            "offset.storage.topic": f"{self.group_id}-offsets",
            "status.storage.topic": f"{self.group_id}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": schemas,
            "value.converter.schemas.enable": schemas,
            "listeners": f"http://{self.rest_host}:{self.rest_port}",
            "rest.advertised.host.name": self.rest_host,
            "rest.advertised.port": str(self.rest_port),
            "offset.flush.interval.ms": str(DEFAULT_OFFSET_FLUSH_INTERVAL_MS),
            "task.shutdown.graceful.timeout.ms": str(TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS),
            # The connectors are on the classpath, not under plugin.path; scanning it is what
            # the default (hybrid_warn) does too, without a warning naming every plugin.
            "plugin.discovery": "only_scan",
        }
        if self.exactly_once:
            properties["exactly.once.source.support"] = "enabled"
        return properties | dict(self.overrides)

    @property
    def rest_url(self) -> str:
        return f"http://{self.rest_host}:{self.rest_port}"


def properties_text(properties: Mapping[str, str]) -> str:
    """A Java properties file holding ``properties`` (ISO 8859-1 safe: non-ASCII escaped)."""
    return "".join(
        f"{_escape(key, True)}={_escape(value, False)}\n" for key, value in properties.items()
    )


def _escape(text: str, is_key: bool) -> str:
    # java.util.Properties.store's rules: backslash, separators in keys, non-Latin-1 as \\u.
    escaped = text.replace("\\", "\\\\")
    if is_key:
        escaped = escaped.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    return "".join(c if 0x20 <= ord(c) < 0x7F else f"\\u{ord(c):04x}" for c in escaped)


def write_worker_files(settings: WorkerSettings, directory: Path) -> tuple[Path, Path]:
    """Writes ``worker.properties`` and ``log4j.properties`` into ``directory``; returns
    their paths."""
    return write_properties_files(settings.properties(), "worker.properties", directory)


def write_properties_files(
    properties: Mapping[str, str], name: str, directory: Path
) -> tuple[Path, Path]:
    """Writes ``properties`` as ``name`` and the logging's ``log4j.properties`` into
    ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = directory / name
    written.write_text(properties_text(properties), encoding="ascii")
    logging = directory / "log4j.properties"
    logging.write_text(LOG4J_PROPERTIES, encoding="ascii")
    return written, logging


def java_executable() -> str | None:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` on PATH, else None."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def worker_command(
    java: str, jars: Sequence[Path], worker_properties: Path, log4j_properties: Path
) -> list[str]:
    """The command line of one distributed worker."""
    return java_command(java, jars, CONNECT_MAIN_CLASS, worker_properties, log4j_properties)


def java_command(
    java: str, jars: Sequence[Path], main_class: str, properties: Path, log4j_properties: Path
) -> list[str]:
    """``main_class`` of the connect set's jars, given its properties file, as Kafka's
    scripts run it (heap, log4j configuration, classpath)."""
    return [
        java,
        *HEAP_OPTIONS,
        f"-Dlog4j.configuration={log4j_properties.resolve().as_uri()}",
        "-cp",
        classpath(jars),
        main_class,
        str(properties),
    ]
