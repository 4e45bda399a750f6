"""``kshim topics``' wire queries: list, describe, create, delete and reconfigure topics.

Requests go through kshim's own blocking client (``kshim.client.wire``), so the command
needs no client library and works against any Kafka broker. Each request is sent at a
version that kshim and Apache Kafka 3.x and 4.x all serve (Kafka 4.0 dropped the oldest
ones, KIP-896): Metadata v11 (served since Kafka 2.8), CreateTopics v7, DeleteTopics v6
(topics by name or id, KIP-516), DescribeConfigs v4 and IncrementalAlterConfigs v1
(KIP-339). All requests go to the bootstrap broker: Kafka forwards the admin requests to
its controller itself (KIP-590), and kshim is one broker. Every socket operation has a
timeout; a connection is used by one thread.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.delete_topics.v6.response import DeleteTopicsResponse
from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
)
from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
from kio.schema.metadata.v11.response import (
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

from kshim.client.admin_connection import BootstrapAdmin
from kshim.client.json_rows import JsonRow
from kshim.client.request_versions import (
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    METADATA,
)

# CreateTopics v4+: -1 partitions or replication factor means the broker's default
# (num.partitions, default.replication.factor; KIP-464).
BROKER_DEFAULT = -1
# How long the broker may take to create or delete before answering REQUEST_TIMED_OUT
# (the Java AdminClient's default.api.timeout.ms is 60 s; a tool's wait is shorter), and
# the connection's read deadline, which outlasts it so that the broker's answer is heard.
OPERATION_TIMEOUT_MS = 30_000
READ_TIMEOUT_S = OPERATION_TIMEOUT_MS / 1000 + 5
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations (AlterConfigOp.OpType)
NO_TOPIC_ID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: name the topic by name

# DescribeConfigs' ConfigSource codes, by the names Kafka's admin tools print
# (ConfigEntry.ConfigSource).
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
SET_ON_TOPIC = "DYNAMIC_TOPIC_CONFIG"


class AdminError(Exception):
    """The broker answered with an error code, closed the connection, or broke the protocol."""


@dataclass(frozen=True, slots=True)
class TopicListing(JsonRow):
    """One topic of ``kshim topics list``."""

    topic: str
    partitions: int
    internal: bool


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: no leader right now
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive config, which Kafka never sends
    source: str  # a CONFIG_SOURCES name
    read_only: bool
    sensitive: bool


@dataclass(frozen=True, slots=True)
class TopicDescription(JsonRow):
    """One topic of ``kshim topics describe``: its partitions and configs."""

    topic: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionDescription, ...]
    configs: tuple[ConfigEntry, ...]


@dataclass(frozen=True, slots=True)
class CreatedTopic(JsonRow):
    """What CreateTopics v5+ says of the topic it made."""

    topic: str
    topic_id: str
    partitions: int
    replication_factor: int


class TopicAdmin(BootstrapAdmin):
    """The topic requests, over one connection; each raises AdminError on an error answer."""

    client_id = "kshim-topics"
    read_timeout_s = READ_TIMEOUT_S
    error = AdminError

    def list_topics(self) -> list[TopicListing]:
        """Every topic the broker lists (internal ones too), sorted by name."""
        return [
            TopicListing(str(topic.name), len(topic.partitions), bool(topic.is_internal))
            for topic in self._metadata(None)
        ]

    def partition_counts(self, names: Sequence[str]) -> dict[str, int]:
        """How many partitions each named topic has (Metadata only, no configs asked)."""
        return {str(topic.name): len(topic.partitions) for topic in self._metadata(names)}

    def describe_topics(
        self, names: Sequence[str] | None, all_configs: bool = False
    ) -> list[TopicDescription]:
        """The named topics (every topic when ``names`` is None), sorted by name, with the
        configs set on each, or with every config when ``all_configs``."""
        topics = self._metadata(names)
        configs = self._configs([str(topic.name) for topic in topics])
        return [_description(topic, configs[str(topic.name)], all_configs) for topic in topics]

    def create_topic(
        self,
        name: str,
        partitions: int = BROKER_DEFAULT,
        replication_factor: int = BROKER_DEFAULT,
        configs: Mapping[str, str] | None = None,
    ) -> CreatedTopic:
        """Creates one topic; raises AdminError (TOPIC_ALREADY_EXISTS, INVALID_CONFIG, ...)."""
        topic = {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": replication_factor,
            "assignments": [],
            "configs": [{"name": key, "value": value} for key, value in (configs or {}).items()],
        }
        request = {"topics": [topic], "timeout": OPERATION_TIMEOUT_MS, "validate_only": False}
        [result] = self._call(CreateTopicsResponse, CREATE_TOPICS, request).topics
        self._check(result.error_code, f"cannot create topic {name}", result.error_message)
        return CreatedTopic(
            name,
            kafka_uuid(result.topic_id),
            int(result.num_partitions),
            int(result.replication_factor),
        )

    def delete_topic(self, name: str) -> None:
        """Deletes one topic; raises AdminError (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        request = {
            "topics": [{"name": name, "topic_id": NO_TOPIC_ID}],
            "timeout": OPERATION_TIMEOUT_MS,
        }
        [result] = self._call(DeleteTopicsResponse, DELETE_TOPICS, request).responses
        self._check(result.error_code, f"cannot delete topic {name}", result.error_message)

    def alter_configs(
        self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str] = ()
    ) -> None:
        """Sets and deletes configs of one topic in one request, all or none of them
        applied (KIP-339); the topic's other configs keep their values."""
        resource = {
            "resource_type": TOPIC_RESOURCE,
            "resource_name": name,
            "configs": _config_changes(set_configs, delete_configs),
        }
        request = {"resources": [resource], "validate_only": False}
        response = self._call(IncrementalAlterConfigsResponse, INCREMENTAL_ALTER_CONFIGS, request)
        [result] = response.responses
        self._check(
            result.error_code, f"cannot alter configs of topic {name}", result.error_message
        )

    def _metadata(self, names: Sequence[str] | None) -> list[MetadataResponseTopic]:
        """Metadata's topics, sorted by name; null topics (v1+) asks for all of them.

        A topic named that has an error (UNKNOWN_TOPIC_OR_PARTITION) raises AdminError;
        a listing of every topic shows each as the broker answered it, so that one topic
        without a leader for a moment does not hide the others.
        """
        topics = None if names is None else [{"name": name} for name in dict.fromkeys(names)]
        # Without this, a broker with auto.create.topics.enable creates the topics named.
        request = {"topics": topics, "allow_auto_topic_creation": False}
        response = self._call(MetadataResponse, METADATA, request)
        for topic in response.topics if names is not None else ():
            self._check(topic.error_code, f"cannot describe topic {topic.name}")
        return sorted(response.topics, key=lambda topic: str(topic.name))

    def _configs(self, names: Sequence[str]) -> dict[str, list[ConfigEntry]]:
        """Every config of each named topic; a null key list asks for all of them."""
        if not names:
            return {}
        resources = [
            {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}
            for name in names
        ]
        request = {"resources": resources, "include_synonyms": False}
        described: dict[str, list[ConfigEntry]] = {}
        for result in self._call(DescribeConfigsResponse, DESCRIBE_CONFIGS, request).results:
            what = f"cannot describe configs of topic {result.resource_name}"
            self._check(result.error_code, what, result.error_message)
            described[str(result.resource_name)] = sorted(
                (_config(entry) for entry in result.configs), key=lambda entry: entry.name
            )
        return described


# ``kshim topics``' admin on the bootstrap broker (BootstrapAdmin.connected).
topic_admin = TopicAdmin.connected


def _description(
    topic: MetadataResponseTopic, configs: list[ConfigEntry], all_configs: bool
) -> TopicDescription:
    """A Metadata topic with its configs: those set on it, or all of them."""
    return TopicDescription(
        topic=str(topic.name),
        topic_id=kafka_uuid(topic.topic_id),
        internal=bool(topic.is_internal),
        partitions=tuple(_partition(partition) for partition in topic.partitions),
        configs=tuple(entry for entry in configs if all_configs or entry.source == SET_ON_TOPIC),
    )


def _partition(partition: MetadataResponsePartition) -> PartitionDescription:
    return PartitionDescription(
        partition=int(partition.partition_index),
        leader=int(partition.leader_id),
        replicas=tuple(int(node) for node in partition.replica_nodes),
        isr=tuple(int(node) for node in partition.isr_nodes),
    )


def _config(entry: DescribeConfigsResourceResult) -> ConfigEntry:
    return ConfigEntry(
        name=str(entry.name),
        value=None if entry.value is None else str(entry.value),
        source=CONFIG_SOURCES.get(int(entry.config_source), "UNKNOWN"),
        read_only=bool(entry.read_only),
        sensitive=bool(entry.is_sensitive),
    )


def _config_changes(
    set_configs: Mapping[str, str], delete_configs: Sequence[str]
) -> list[dict[str, object]]:
    changes: list[dict[str, object]] = [
        {"name": key, "config_operation": SET, "value": value} for key, value in set_configs.items()
    ]
    changes += [{"name": key, "config_operation": DELETE, "value": None} for key in delete_configs]
    return changes


def kafka_uuid(value: uuid.UUID | None) -> str:
    """A topic id as Kafka writes it (Uuid.toString: URL-safe base64 of the 16 bytes, no
    padding), which kafka-topics.sh prints and takes; the zero id for none."""
    raw = (value or NO_TOPIC_ID).bytes
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
