"""The Apache Kafka columns of the side-by-side runs, and how each is had.

- ``kafka``: the comparisons' Kafka (compat_tests/kafka_sources.py): by default Apache Kafka
  3.9 from the pinned jars (``python -m kshim.jvm kafka``) with its own defaults, under which
  a batch is acknowledged once it is in the page cache and fsynced later by the OS (Kafka
  counts on replication, not fsync, for durability: "Log Flush Policy" in Kafka's
  documentation); else the one ``KSHIM_KAFKA_BOOTSTRAP`` or ``KSHIM_KAFKA_CMD`` names.
- ``kafka-fsync``: the same jars with ``log.flush.interval.messages=1``. Kafka's
  ``UnifiedLog.append`` flushes the log once that many messages are unflushed, inside the
  append and so before the high watermark moves and the produce is answered: every batch is
  fsynced before its acknowledgement, as kshim does by default. The durable comparison.
- ``kafka4``: Apache Kafka 4 from its own pinned set, with its defaults (not run unless
  asked for: ``--brokers ...,kafka4``).

The two extra columns always come from the jars, whatever the environment says of
``kafka``: a command or a running cluster cannot be given another flush setting here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.kafka_sources import JARS, REFERENCE_JARS, jars_command, kafka_source
from kshim.jvm import artifacts

DEFAULT = "kafka"
FSYNC = "kafka-fsync"
KAFKA4 = "kafka4"
FLUSH_MESSAGES = "log.flush.interval.messages"
# Read back from every started Kafka by DescribeConfigs, so the report shows what the broker
# really ran with rather than what was asked for.
CHECKED_SETTINGS = (FLUSH_MESSAGES, "log.flush.interval.ms")
SETTINGS_TIMEOUT_S = 30.0
JAVA = "java"


@dataclass(frozen=True)
class KafkaColumn:
    """One Kafka column: the artifact set it runs from and the broker settings on top of
    the sample configuration; ``follows_environment`` for the one column that a
    KSHIM_KAFKA_BOOTSTRAP or KSHIM_KAFKA_CMD replaces."""

    name: str
    jars: str
    settings: Mapping[str, str] = field(default_factory=dict)
    follows_environment: bool = False
    meaning: str = ""


COLUMNS = {
    column.name: column
    for column in (
        KafkaColumn(DEFAULT, REFERENCE_JARS, {}, True, "its defaults: acknowledges before fsync"),
        KafkaColumn(
            FSYNC,
            REFERENCE_JARS,
            {FLUSH_MESSAGES: "1"},
            False,
            "fsync of every batch before its acknowledgement, as kshim",
        ),
        KafkaColumn(KAFKA4, "kafka4", {}, False, "its defaults: acknowledges before fsync"),
    )
}


def is_kafka(name: str) -> bool:
    return name in COLUMNS


def from_jars(name: str) -> bool:
    """Whether column ``name`` runs from the pinned jars (not a user's command or cluster)."""
    return not COLUMNS[name].follows_environment or kafka_source().kind == JARS


def unavailable_reason(name: str) -> str | None:
    """Why a jars-based column cannot run here (no Java, no Maven and nothing cached), or
    None; the environment's ``kafka`` is for compat_tests.brokers to judge."""
    return artifacts.unavailable_reason(COLUMNS[name].jars)


def command_template(name: str, settings: Mapping[str, str] | None = None) -> str:
    """The command that starts column ``name`` from its jars, fetched first (so that a cold
    Maven is not counted in the start time). The command ``exec``s the launcher, which
    itself becomes the JVM: the process group is the JVM alone, and the PID the benchmarks
    hold is the broker's."""
    column = COLUMNS[name]
    artifacts.resolve(column.jars)
    return jars_command(column.jars, {**column.settings, **(settings or {})})


def describe(name: str) -> str:
    """One line for the report: where column ``name``'s Kafka comes from, and its settings."""
    column = COLUMNS[name]
    if not from_jars(name):
        return kafka_source().describe()
    coordinate = artifacts.artifact_set(column.jars).coordinates()[0]
    settings = ", ".join(f"`{key}={value}`" for key, value in column.settings.items())
    return (
        f"Apache Kafka `{coordinate}` from Maven Central, single-node KRaft, "
        f"{settings + ': ' if settings else ''}{column.meaning}"
    )


def settings_in_force(bootstrap: str) -> dict[str, str]:
    """CHECKED_SETTINGS as the broker at ``bootstrap`` reports them (DescribeConfigs on
    its first broker); raises on a broker that does not answer in time."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    broker_id = min(admin.list_topics(timeout=SETTINGS_TIMEOUT_S).brokers)
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(SETTINGS_TIMEOUT_S)
    return {key: str(entries[key].value) for key in CHECKED_SETTINGS if key in entries}


def check_settings(name: str, in_force: Mapping[str, str], asked: Mapping[str, str]) -> None:
    """Raises RuntimeError when a setting column ``name`` asked for is not in force."""
    for key, value in {**COLUMNS[name].settings, **asked}.items():
        if key in CHECKED_SETTINGS and in_force.get(key) != value:
            raise RuntimeError(f"{name}: {key} is {in_force.get(key)!r}, not {value!r}")


def check_is_java(pid: int) -> None:
    """Raises RuntimeError unless process ``pid`` runs the JVM: the launcher must have
    become it, or the process measured would be a launcher waiting on a child."""
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/exe").resolve().name == JAVA:
            return
    raise RuntimeError(f"process {pid} launched for Kafka is not {JAVA}: {process_name(pid)}")


def process_name(pid: int) -> str:
    """The process's command name (/proc/<pid>/comm), "" once it has gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
