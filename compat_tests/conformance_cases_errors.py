"""Conformance cases for refusals and edge answers: unknown topics, partitions, groups and
members, offsets out of range, a topic created twice. Kafka's answers to these carry error
codes, messages and "no value" sentinels (-1, null) that the cases of the happy paths do
not reach.
"""

from __future__ import annotations

from typing import Any

from compat_tests.conformance_bodies import (
    LED_PARTITION,
    commit_request,
    join_refusal,
    join_request,
    metadata_answer,
    offset_fetch_exchange,
    produce_refusal,
    produce_request,
)
from compat_tests.conformance_probe import (
    BASE_TIMESTAMP_MS,
    INT32_MIN,
    Exchange,
    Probe,
    create_topic_request,
    record_batch,
)

RECORDS = 3
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE, ILLEGAL_GENERATION = 3, 1, 22
UNKNOWN_MEMBER_ID, TOPIC_ALREADY_EXISTS, GROUP_ID_NOT_FOUND = 25, 36, 69
INVALID_CONFIG = 40
EARLIEST = -2
NO_OFFSET = NO_PARTITIONS = -1
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
    created = {"error_code": 0, "name": topic, "is_internal": False, "partitions": [LED_PARTITION]}
    return _described(probe, actual, created)


def _described(probe: Probe, actual: Any, topic: dict[str, Any]) -> dict[str, Any]:
    return metadata_answer(probe, getattr(actual, "cluster_id", None), topic)


def produce_unknown_partition(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("produce-partition")
    request = produce_request(topic, 1, record_batch(RECORDS))
    expected = produce_refusal(topic, 1, UNKNOWN_TOPIC_OR_PARTITION)
    return Exchange(request, lambda _: expected)


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
    return offset_fetch_exchange(group, topic, NO_OFFSET, "")


def join_unknown_member(probe: Probe, version: int) -> Exchange:
    request = join_request(probe.name("join-unknown"), "not-a-member")
    refused = join_refusal(UNKNOWN_MEMBER_ID, "not-a-member", version)
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
    request = create_topic_request(topic)
    expected = refused_creation(topic, TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
    return Exchange(request, lambda _: expected)


def create_topic_bad_config(probe: Probe, version: int) -> Exchange:
    """Kafka's ConfigException: the value, the key, and the parser's reason."""
    topic = probe.name("bad-config")
    request = create_topic_request(topic, configs={"retention.ms": "soon"})
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
    request = commit_request(group, topic, 1, "not-a-member", 1, "")
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
