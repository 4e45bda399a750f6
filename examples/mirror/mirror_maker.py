"""MirrorMaker 2 copying a kshim broker's topics to an Apache Kafka cluster: its properties
and its java command (docs/gateway.md, "Moving a kshim's topics to a Kafka cluster").

    python -m examples.mirror.mirror_maker --source KSHIM:9092 --target KAFKA:9092 \\
        --topics orders,customers --work-dir mm2 [--replication-factor 3]

MirrorMaker 2 in dedicated mode (Kafka's ``connect-mirror-maker.sh``: the class
``org.apache.kafka.connect.mirror.MirrorMaker``, Kafka Connect's mirror connectors in a
worker of their own), from the ``connect`` set of ``kshim.jvm`` (``kshim/jvm/poms/connect.xml``,
fetched by Maven once, never committed). One flow, ``kshim->kafka``, with what a move of
kshim's topics needs changed from MirrorMaker's defaults:

- ``IdentityReplicationPolicy`` (Kafka 3.0; MirrorMaker 2 itself is KIP-382): topic ``T``
  stays ``T`` on the cluster, where MirrorMaker's default would name it ``kshim.T``;
- ``kshim.consumer.isolation.level=read_committed``: MirrorMaker's source consumer reads
  uncommitted records by default, so an aborted transaction's records (kshim's half
  messages that were rolled back) would be copied as ordinary ones and show in every
  reader of the copy, ``T.full`` included;
- the replication factor of the copies and of MirrorMaker's own topics
  (``--replication-factor``; 1 for a single-node cluster).

MirrorMaker copies records (key, value, headers, timestamp), not offsets: the copies get the
cluster's own, and its checkpoints translate consumer groups' committed offsets. Its
offset-sync topic lives on the source, kshim, which creates it like any topic.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from examples.connect.classpath import ClasspathError, worker_jars
from examples.connect.worker import java_command, java_executable, write_properties_files

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
MIRROR_JAR_PREFIX = "connect-mirror-"
SOURCE, TARGET = "kshim", "kafka"
# MirrorMaker's own topics, each with its replication factor setting.
INTERNAL_REPLICATION_SETTINGS = (
    "replication.factor",  # of the copies
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "config.storage.replication.factor",
)


@dataclass(frozen=True, slots=True)
class MirrorSettings:
    source_bootstrap: str  # the kshim broker
    target_bootstrap: str  # the Kafka cluster
    topics: Sequence[str]
    replication_factor: int = 3
    overrides: Mapping[str, str] | None = None  # any MirrorMaker property

    def properties(self) -> dict[str, str]:
        """The properties file's entries; ``overrides`` win."""
        flow = f"{SOURCE}->{TARGET}"
        properties = {
            "clusters": f"{SOURCE}, {TARGET}",
            f"{SOURCE}.bootstrap.servers": self.source_bootstrap,
            f"{TARGET}.bootstrap.servers": self.target_bootstrap,
            f"{flow}.enabled": "true",
            # A list of regular expressions: a topic's name matched as it is.
            f"{flow}.topics": ", ".join(re.escape(topic) for topic in self.topics),
            f"{TARGET}->{SOURCE}.enabled": "false",
            "replication.policy.class": IDENTITY_POLICY,
            f"{SOURCE}.consumer.isolation.level": "read_committed",
            # kshim's ACLs are its own: the cluster keeps the ones written for it.
            "sync.topic.acls.enabled": "false",
        }
        factor = str(self.replication_factor)
        properties |= dict.fromkeys(INTERNAL_REPLICATION_SETTINGS, factor)
        return properties | dict(self.overrides or {})


def mirror_jars() -> list[Path]:
    """The connect set's jars, which carry the mirror connectors; raises ClasspathError."""
    jars = worker_jars()
    if not any(jar.name.startswith(MIRROR_JAR_PREFIX) for jar in jars):
        raise ClasspathError(f"the connect jars lack {MIRROR_JAR_PREFIX}*.jar")
    return jars


def write_files(settings: MirrorSettings, directory: Path) -> tuple[Path, Path]:
    """Writes ``mm2.properties`` and ``log4j.properties`` into ``directory``."""
    return write_properties_files(settings.properties(), "mm2.properties", directory)


def mirror_command(
    java: str, jars: Sequence[Path], properties: Path, log4j_properties: Path
) -> list[str]:
    return java_command(java, jars, MAIN_CLASS, properties, log4j_properties)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs MirrorMaker 2 in the foreground until it exits (^C stops it)."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.mirror.mirror_maker", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--source", required=True, help="the kshim broker, HOST:PORT")
    parser.add_argument("--target", required=True, help="the Kafka cluster, HOST:PORT[,...]")
    parser.add_argument("--topics", required=True, help="comma-separated topic names")
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--replication-factor", type=int, default=3)
    arguments = parser.parse_args(argv)
    java = java_executable()
    if java is None:
        print("mirror_maker: error: no java (set JAVA_HOME or put java on PATH)", file=sys.stderr)
        return 1
    try:
        jars = mirror_jars()
    except ClasspathError as error:
        print(f"mirror_maker: error: {error}", file=sys.stderr)
        return 1
    topics = [name.strip() for name in arguments.topics.split(",") if name.strip()]
    settings = MirrorSettings(arguments.source, arguments.target, topics,
                              arguments.replication_factor)  # fmt: skip
    properties, logging = write_files(settings, arguments.work_dir)
    return subprocess.call(mirror_command(java, jars, properties, logging))


if __name__ == "__main__":
    sys.exit(main())
