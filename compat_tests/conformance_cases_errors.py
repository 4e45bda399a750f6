"""Conformance cases for refusals and edge answers: unknown topics, partitions, groups and
members, offsets out of range, a topic created twice. Kafka's answers to these carry error
codes, messages and "no value" sentinels (-1, null) that the cases of the happy paths do
not reach.
"""

from __future__ import annotations

from typing import Any

from compat_tests.conformance_probe import (
    BASE_TIMESTAMP_MS,
    INT32_MIN,
    NODE_ID,
    PROTOCOL,
    SESSION_TIMEOUT_MS,
    SUBSCRIPTION,
    Exchange,
    Probe,
    record_batch,
)

RECORDS = 3
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE, ILLEGAL_GENERATION = 3, 1, 22
UNKNOWN_MEMBER_ID, TOPIC_ALREADY_EXISTS, GROUP_ID_NOT_FOUND = 25, 36, 69
INVALID_CONFIG = 40
NULLABLE_PROTOCOL_NAME_V = 7  # JoinGroup's protocol name is nullable from v7 (KIP-559)
EARLIEST = -2
NO_OFFSET = NO_PARTITIONS = NO_LEADER = -1
UNKNOWN_TOPIC = "This server does not host this topic-partition."  # Errors' own message
FIRST_FLAG_OF_AUTO_CREATION = 4  # Metadata v4 added AllowAutoTopicCreation (KIP-204)


def metadata_unknown_topic(probe: Probe, version: int) -> Exchange:
    """Not created: v4+ ask for no auto-creation; before v4 every Metadata request allows
    it, and kshim creates the topic before it answers (conformance_allowed.py)."""
    topic = probe.name("missing")
    request = {
        "topics": [{"name": topic}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    if version < FIRST_FLAG_OF_AUTO_CREATION:
        return Exchange(request, lambda actual: _auto_created(probe, topic, actual))
    unknown = {
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "name": topic,
        "topic_id": None,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": INT32_MIN,
    }
    return Exchange(request, lambda actual: _described(probe, actual, unknown))


def _auto_created(probe: Probe, topic: str, actual: Any) -> dict[str, Any]:
    partition = {
        "error_code": 0,
        "partition_index": 0,
        "leader_id": NODE_ID,
        "leader_epoch": 0,
        "replica_nodes": [NODE_ID],
        "isr_nodes": [NODE_ID],
        "offline_replicas": [],
    }
    created = {"error_code": 0, "name": topic, "is_internal": False, "partitions": [partition]}
    return _described(probe, actual, created)


def _described(probe: Probe, actual: Any, topic: dict[str, Any]) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": NODE_ID, "host": probe.host, "port": probe.port}],
        "cluster_id": getattr(actual, "cluster_id", None),
        "controller_id": NODE_ID,
        "topics": [topic],
        "cluster_authorized_operations": INT32_MIN,
    }


def produce_unknown_partition(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("produce-partition")
    partitions = [{"index": 1, "records": record_batch(RECORDS)}]
    request = {
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": partitions}],
    }
    refused: dict[str, Any] = {
        "index": 1,
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "base_offset": NO_OFFSET,
        "log_append_time": None,
        "log_start_offset": NO_OFFSET,
        "record_errors": [],
        "error_message": None,
        "current_leader": {"leader_id": NO_LEADER, "leader_epoch": NO_LEADER},
    }
    expected = {"responses": [{"name": topic, "partition_responses": [refused]}]}
    return Exchange(request, lambda _: {**expected, "throttle_time": 0})


def list_offsets_earliest_and_by_time(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("list-offsets-time", partitions=2)
    probe.produce(topic, RECORDS)
    partitions = [
        {"partition_index": 0, "timestamp": BASE_TIMESTAMP_MS + 1000},
        {"partition_index": 1, "timestamp": EARLIEST},
    ]
    request = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": partitions}],
    }
    answers = [
        {
            "partition_index": 0,
            "error_code": 0,
            "timestamp": BASE_TIMESTAMP_MS + 1000,
            "offset": 1,
            "leader_epoch": 0,
        },
        {"partition_index": 1, "error_code": 0, "timestamp": -1, "offset": 0, "leader_epoch": 0},
    ]
    expected = {"throttle_time": 0, "topics": [{"name": topic, "partitions": answers}]}
    return Exchange(request, lambda _: expected)


def offset_fetch_uncommitted(probe: Probe, version: int) -> Exchange:
    topic, group = probe.create_topic("fetch-none"), probe.name("fetch-none-group")
    topics = [{"name": topic, "partition_indexes": [0]}]
    request = {
        "group_id": group,
        "topics": topics,
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
        "require_stable": False,
    }
    partition = {
        "partition_index": 0,
        "committed_offset": NO_OFFSET,
        "committed_leader_epoch": -1,
        "metadata": "",
        "error_code": 0,
    }
    answer = [{"name": topic, "partitions": [partition]}]
    expected = {
        "throttle_time": 0,
        "topics": answer,
        "error_code": 0,
        "groups": [{"group_id": group, "topics": answer, "error_code": 0}],
    }
    return Exchange(request, lambda _: expected)


def join_unknown_member(probe: Probe, version: int) -> Exchange:
    request = {
        "group_id": probe.name("join-unknown"),
        "session_timeout": SESSION_TIMEOUT_MS,
        "rebalance_timeout": SESSION_TIMEOUT_MS,
        "member_id": "not-a-member",
        "protocol_type": "consumer",
        "protocols": [{"name": PROTOCOL, "metadata": SUBSCRIPTION}],
    }
    refused: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": UNKNOWN_MEMBER_ID,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if version >= NULLABLE_PROTOCOL_NAME_V else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": "not-a-member",
        "members": [],
    }
    return Exchange(request, lambda _: refused)


def heartbeat_old_generation(probe: Probe, version: int) -> Exchange:
    group = probe.name("heartbeat-old")
    member_id, generation = probe.join(group)
    request = {"group_id": group, "generation_id": generation + 1, "member_id": member_id}
    return Exchange(request, lambda _: {"throttle_time": 0, "error_code": ILLEGAL_GENERATION})


def describe_unknown_group(probe: Probe, version: int) -> Exchange:
    """Kafka describes a group it does not know as Dead, without an error."""
    group = probe.name("nobody")
    request = {"groups": [group], "include_authorized_operations": False}
    dead = {
        "error_code": 0,
        "group_id": group,
        "group_state": "Dead",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": INT32_MIN,
    }
    return Exchange(request, lambda _: {"throttle_time": 0, "groups": [dead]})


def delete_unknown_group(probe: Probe, version: int) -> Exchange:
    group = probe.name("nobody")
    result = {"group_id": group, "error_code": GROUP_ID_NOT_FOUND}
    return Exchange({"groups_names": [group]}, lambda _: {"throttle_time": 0, "results": [result]})


def refused_creation(topic: str, error_code: int, message: str) -> dict[str, Any]:
    """CreateTopics' answer for a topic not created: v5+ with no partition count,
    replication factor or configs (an empty list, not null), as Kafka's controller."""
    result: dict[str, Any] = {
        "name": topic,
        "topic_id": None,
        "error_code": error_code,
        "error_message": message,
        "topic_config_error_code": 0,
        "num_partitions": NO_PARTITIONS,
        "replication_factor": NO_PARTITIONS,
        "configs": [],
    }
    return {"throttle_time": 0, "topics": [result]}


def create_existing_topic(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("twice")
    request = {
        "topics": [
            {
                "name": topic,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 10_000,
        "validate_only": False,
    }
    expected = refused_creation(topic, TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
    return Exchange(request, lambda _: expected)


def create_topic_bad_config(probe: Probe, version: int) -> Exchange:
    """Kafka's ConfigException: the value, the key, and the parser's reason."""
    topic = probe.name("bad-config")
    request = {
        "topics": [
            {
                "name": topic,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "retention.ms", "value": "soon"}],
            }
        ],
        "timeout": 10_000,
        "validate_only": False,
    }
    expected = refused_creation(
        topic,
        INVALID_CONFIG,
        "Invalid value soon for configuration retention.ms: Not a number of type LONG",
    )
    return Exchange(request, lambda _: expected)


def delete_unknown_topic(probe: Probe, version: int) -> Exchange:
    missing = probe.name("missing")
    request = {"topic_names": [missing], "topics": [{"name": missing}], "timeout": 10_000}
    result = {
        "name": missing,
        "topic_id": None,
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "error_message": UNKNOWN_TOPIC,
    }
    return Exchange(request, lambda _: {"throttle_time": 0, "responses": [result]})


def delete_records_past_end(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("delete-past")
    probe.produce(topic, RECORDS)
    request = {
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 10}]}],
        "timeout": 10_000,
    }
    # Kafka's ReplicaManager gives no low watermark (-1) with a refusal.
    refused = {"partition_index": 0, "low_watermark": NO_OFFSET, "error_code": OFFSET_OUT_OF_RANGE}
    expected = {"throttle_time": 0, "topics": [{"name": topic, "partitions": [refused]}]}
    return Exchange(request, lambda _: expected)


def commit_unknown_member(probe: Probe, version: int) -> Exchange:
    topic, group = probe.create_topic("commit-member"), probe.name("commit-member")
    probe.join(group)
    partition = {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
    request = {
        "group_id": group,
        "generation_id_or_member_epoch": 1,
        "member_id": "not-a-member",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [{"name": topic, "partitions": [partition]}],
    }
    refused = {"partition_index": 0, "error_code": UNKNOWN_MEMBER_ID}
    expected = {"throttle_time": 0, "topics": [{"name": topic, "partitions": [refused]}]}
    return Exchange(request, lambda _: expected)


ERROR_CASES = {
    "metadata-unknown-topic": (3, metadata_unknown_topic),
    "produce-unknown-partition": (0, produce_unknown_partition),
    "list-offsets-earliest-and-by-time": (2, list_offsets_earliest_and_by_time),
    "offset-fetch-uncommitted": (9, offset_fetch_uncommitted),
    "join-unknown-member": (11, join_unknown_member),
    "heartbeat-old-generation": (12, heartbeat_old_generation),
    "describe-unknown-group": (15, describe_unknown_group),
    "delete-unknown-group": (42, delete_unknown_group),
    "create-existing-topic": (19, create_existing_topic),
    "create-topic-bad-config": (19, create_topic_bad_config),
    "delete-unknown-topic": (20, delete_unknown_topic),
    "delete-records-past-end": (21, delete_records_past_end),
    "commit-unknown-member": (8, commit_unknown_member),
}
