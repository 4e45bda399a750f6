"""Conformance cases for refusals of the group and transaction coordinators and of the
config APIs: unknown members and transactional ids, stale epochs, a transaction ended
with nothing in it, an unknown topic's configs."""

from __future__ import annotations

import datetime
from typing import Any

from compat_tests.conformance_probe import (
    ASSIGNMENT,
    NODE_ID,
    TOPIC_RESOURCE,
    Exchange,
    Probe,
    record_batch,
)

UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_MEMBER_ID, INVALID_PRODUCER_EPOCH = 3, 25, 47
INVALID_TXN_STATE, TRANSACTIONAL_ID_NOT_FOUND, PRODUCER_FENCED = 48, 105, 90
INVALID_CONFIG, INVALID_REQUEST = 40, 42
INCREMENTAL_SET, INCREMENTAL_APPEND = 0, 2
SOMETIMES = "Invalid value sometimes for configuration cleanup.policy"
POLICIES = "String must be one of: compact, delete"
UNKNOWN_KEY_TYPE, SHARE_KEY_TYPE = 7, 2
FIRST_BATCHED_FIND_V, FIRST_SHARE_V = 4, 6  # FindCoordinator: KIP-699, KIP-932
COORDINATOR_NOT_AVAILABLE = 15
FIRST_BATCHED_LEAVE_V = 3  # LeaveGroup v3 answers per member (KIP-345)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)  # a start time of 0 ms


NO_OFFSET = NO_NODE = -1
# Errors.INVALID_REQUEST's own message, which Kafka sends for a request it cannot serve.
MALFORMED = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)
FIRST_PRODUCER_FENCED_V = 3  # AddPartitionsToTxn v3+ say PRODUCER_FENCED (KIP-588)


def _answer(**fields: Any) -> Any:
    return lambda _: {"throttle_time": 0, **fields}


def sync_unknown_member(probe: Probe, version: int) -> Exchange:
    group = probe.name("sync-unknown")
    _, generation = probe.join(group)
    request = {
        "group_id": group,
        "generation_id": generation,
        "member_id": "not-a-member",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": "not-a-member", "assignment": ASSIGNMENT}],
    }
    refused = _answer(
        error_code=UNKNOWN_MEMBER_ID, protocol_type=None, protocol_name=None, assignment=b""
    )
    return Exchange(request, refused)


def leave_unknown_member(probe: Probe, version: int) -> Exchange:
    group = probe.name("leave-unknown")
    probe.join(group)
    request = {
        "group_id": group,
        "member_id": "not-a-member",
        "members": [{"member_id": "not-a-member", "group_instance_id": None, "reason": None}],
    }
    if version < FIRST_BATCHED_LEAVE_V:
        return Exchange(request, _answer(error_code=UNKNOWN_MEMBER_ID, members=[]))
    member = {
        "member_id": "not-a-member",
        "group_instance_id": None,
        "error_code": UNKNOWN_MEMBER_ID,
    }
    return Exchange(request, _answer(error_code=0, members=[member]))


def commit_unknown_topic(probe: Probe, version: int) -> Exchange:
    missing, group = probe.name("missing"), probe.name("commit-missing")
    partition = {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
    request = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [{"name": missing, "partitions": [partition]}],
    }
    refused = {"partition_index": 0, "error_code": UNKNOWN_TOPIC_OR_PARTITION}
    return Exchange(request, _answer(topics=[{"name": missing, "partitions": [refused]}]))


def end_empty_transaction(probe: Probe, version: int) -> Exchange:
    transactional_id = probe.name("txn-empty")
    producer = probe.init_producer(transactional_id)
    request = {
        "transactional_id": transactional_id,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch,
        "committed": True,
    }
    # Kafka's coordinator refuses to end a transaction in state Empty, either way.
    return Exchange(request, _answer(error_code=INVALID_TXN_STATE))


def add_partitions_old_epoch(probe: Probe, version: int) -> Exchange:
    topic, transactional_id = probe.create_topic("old-epoch"), probe.name("txn-old-epoch")
    first = probe.init_producer(transactional_id)
    probe.init_producer(transactional_id)  # bumps the epoch: the first one is fenced
    request = {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": first.producer_id,
        "v3_and_below_producer_epoch": first.epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }
    fenced = PRODUCER_FENCED if version >= FIRST_PRODUCER_FENCED_V else INVALID_PRODUCER_EPOCH
    return Exchange(request, _added(topic, fenced))


def _added(topic: str, error_code: int) -> Any:
    result = {"partition_index": 0, "partition_error_code": error_code}
    topics = [{"name": topic, "results_by_partition": [result]}]
    return _answer(results_by_topic_v3_and_below=topics)


def add_partitions_unknown_topic(probe: Probe, version: int) -> Exchange:
    transactional_id, missing = probe.name("txn-missing"), probe.name("missing")
    producer = probe.init_producer(transactional_id)
    request = {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": producer.producer_id,
        "v3_and_below_producer_epoch": producer.epoch,
        "v3_and_below_topics": [{"name": missing, "partitions": [0]}],
    }
    return Exchange(request, _added(missing, UNKNOWN_TOPIC_OR_PARTITION))


def describe_unknown_transaction(probe: Probe, version: int) -> Exchange:
    """Kafka sets nothing but the error: the other fields are their defaults, 0 and ""."""
    transactional_id = probe.name("txn-nobody")
    unknown = {
        "error_code": TRANSACTIONAL_ID_NOT_FOUND,
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": EPOCH,
        "producer_id": 0,
        "producer_epoch": 0,
        "topics": [],
    }
    return Exchange(
        {"transactional_ids": [transactional_id]}, _answer(transaction_states=[unknown])
    )


def describe_producers_unknown_partition(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("producers-missing")
    partitions: list[dict[str, Any]] = [
        {"partition_index": 0, "error_code": 0, "error_message": None, "active_producers": []},
        {
            "partition_index": 3,
            "error_code": UNKNOWN_TOPIC_OR_PARTITION,
            "error_message": None,
            "active_producers": [],
        },
    ]
    return Exchange(
        {"topics": [{"name": topic, "partition_indexes": [0, 3]}]},
        _answer(topics=[{"name": topic, "partitions": partitions}]),
    )


def list_offsets_unknown_partition(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("list-offsets-missing")
    request = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 5, "timestamp": -1}]}],
    }
    refused = {
        "partition_index": 5,
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "timestamp": NO_OFFSET,
        "offset": NO_OFFSET,
        "leader_epoch": NO_OFFSET,
    }
    return Exchange(request, _answer(topics=[{"name": topic, "partitions": [refused]}]))


def alter_unknown_topic_configs(probe: Probe, version: int) -> Exchange:
    missing = probe.name("missing")
    request = {
        "resources": [
            {
                "resource_type": TOPIC_RESOURCE,
                "resource_name": missing,
                "configs": [{"name": "retention.ms", "value": "1000"}],
            }
        ],
        "validate_only": False,
    }
    return Exchange(request, _unknown_topic(missing))


def _unknown_topic(missing: str) -> Any:
    """Kafka's words for a topic to configure that does not exist (ZkAdminManager's)."""
    result = {
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "error_message": f"The topic '{missing}' does not exist.",
        "resource_type": TOPIC_RESOURCE,
        "resource_name": missing,
    }
    return _answer(responses=[result])


def incremental_unknown_topic(probe: Probe, version: int) -> Exchange:
    missing = probe.name("missing")
    change = {"name": "retention.ms", "config_operation": INCREMENTAL_SET, "value": "1000"}
    resource = {"resource_type": TOPIC_RESOURCE, "resource_name": missing}
    request = {"resources": [{**resource, "configs": [change]}], "validate_only": False}
    return Exchange(request, _unknown_topic(missing))


def incremental_bad_value(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("incremental-bad")
    change = {"name": "cleanup.policy", "config_operation": INCREMENTAL_SET, "value": "sometimes"}
    request = {
        "resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [change]}
        ],
        "validate_only": False,
    }
    return Exchange(request, _refused_config(topic, INVALID_CONFIG, f"{SOMETIMES}: {POLICIES}"))


def _refused_config(topic: str, error_code: int, message: str) -> Any:
    result = {
        "error_code": error_code,
        "error_message": message,
        "resource_type": TOPIC_RESOURCE,
        "resource_name": topic,
    }
    return _answer(responses=[result])


def incremental_append_to_a_number(probe: Probe, version: int) -> Exchange:
    """APPEND and SUBTRACT are for LIST configs only."""
    topic = probe.create_topic("incremental-append")
    change = {"name": "segment.bytes", "config_operation": INCREMENTAL_APPEND, "value": "1"}
    request = {
        "resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [change]}
        ],
        "validate_only": False,
    }
    message = "Can't APPEND to key segment.bytes because its type is not LIST."
    return Exchange(request, _refused_config(topic, INVALID_CONFIG, message))


def alter_configs_refusals(probe: Probe, version: int) -> Exchange:
    """Three topics: a value under its minimum (Kafka's Range), a config Kafka does not
    know, and a null value (a malformed request) for a topic that does not exist. (A
    topic named twice in one AlterConfigs request gets no answer at all from Kafka 3.9.)"""
    first, second = probe.create_topic("alter-range"), probe.create_topic("alter-unknown")
    missing = probe.name("missing")
    resources = [
        (first, "segment.bytes", "13"),
        (second, "no.such.config", "1"),
        (missing, "retention.ms", None),
    ]
    request = {
        "resources": [
            {
                "resource_type": TOPIC_RESOURCE,
                "resource_name": name,
                "configs": [{"name": key, "value": value}],
            }
            for name, key, value in resources
        ],
        "validate_only": False,
    }
    refused = [
        (first, INVALID_CONFIG, "Invalid value 13 for configuration segment.bytes: "
         "Value must be at least 14"),
        (second, INVALID_CONFIG, "Unknown topic config name: no.such.config"),
        (missing, INVALID_REQUEST, "Null value not supported for : retention.ms"),
    ]  # fmt: skip
    results = [
        {
            "error_code": error_code,
            "error_message": message,
            "resource_type": TOPIC_RESOURCE,
            "resource_name": name,
        }
        for name, error_code, message in refused
    ]
    return Exchange(request, _answer(responses=results))


def find_unknown_key_type(probe: Probe, version: int) -> Exchange:
    """v0 has no key type (a group is looked up and found); v1+ refuse a type Kafka does
    not know, the whole request with INVALID_REQUEST and that error's own message."""
    key = probe.name("key")
    request = {"key": key, "key_type": UNKNOWN_KEY_TYPE, "coordinator_keys": [key]}
    if version == 0:
        found = {"error_code": 0, "node_id": NODE_ID, "host": probe.host, "port": probe.port}
        return Exchange(request, _answer(**found))
    nowhere = {"node_id": NO_NODE, "host": "", "port": NO_NODE}
    refused = {"error_code": INVALID_REQUEST, "error_message": MALFORMED, **nowhere}
    return Exchange(request, _answer(**refused, coordinators=[{"key": key, **refused}]))


def find_share_coordinator(probe: Probe, version: int) -> Exchange:
    """Key type 2 asks for a share group's coordinator (KIP-932); v0 has no key type."""
    key = probe.name("share")
    request = {"key": key, "key_type": SHARE_KEY_TYPE, "coordinator_keys": [key]}
    if version == 0:
        found = {"error_code": 0, "node_id": NODE_ID, "host": probe.host, "port": probe.port}
        return Exchange(request, _answer(**found))
    nowhere = {"node_id": NO_NODE, "host": "", "port": NO_NODE}
    if version < FIRST_BATCHED_FIND_V:  # the whole request fails
        refused = {"error_code": INVALID_REQUEST, "error_message": MALFORMED, **nowhere}
        return Exchange(request, _answer(**refused))
    # Kafka 3.9 has no share coordinator yet (v6 may ask for one); v4-5 may not ask.
    error = COORDINATOR_NOT_AVAILABLE if version >= FIRST_SHARE_V else INVALID_REQUEST
    per_key = {"key": key, "error_code": error, "error_message": "", **nowhere}
    return Exchange(request, _answer(coordinators=[per_key]))


def produce_unknown_topic(probe: Probe, version: int) -> Exchange:
    """Produce creates no topic, whatever auto.create.topics.enable says."""
    missing = probe.name("missing")
    request = {
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [
            {"name": missing, "partition_data": [{"index": 0, "records": record_batch(1)}]}
        ],
    }
    refused: dict[str, Any] = {
        "index": 0,
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "base_offset": NO_OFFSET,
        "log_append_time": None,
        "log_start_offset": NO_OFFSET,
        "record_errors": [],
        "error_message": None,
        "current_leader": {"leader_id": NO_NODE, "leader_epoch": NO_NODE},
    }
    topics = [{"name": missing, "partition_responses": [refused]}]
    return Exchange(request, _answer(responses=topics))


COORDINATOR_ERROR_CASES = {
    "sync-unknown-member": (14, sync_unknown_member),
    "leave-unknown-member": (13, leave_unknown_member),
    "commit-unknown-topic": (8, commit_unknown_topic),
    "end-empty-transaction": (26, end_empty_transaction),
    "add-partitions-old-epoch": (24, add_partitions_old_epoch),
    "add-partitions-unknown-topic": (24, add_partitions_unknown_topic),
    "describe-unknown-transaction": (65, describe_unknown_transaction),
    "describe-producers-unknown-partition": (61, describe_producers_unknown_partition),
    "list-offsets-unknown-partition": (2, list_offsets_unknown_partition),
    "alter-unknown-topic-configs": (33, alter_unknown_topic_configs),
    "incremental-bad-value": (44, incremental_bad_value),
    "incremental-append-to-a-number": (44, incremental_append_to_a_number),
    "alter-configs-refusals": (33, alter_configs_refusals),
    "incremental-unknown-topic": (44, incremental_unknown_topic),
    "find-unknown-key-type": (10, find_unknown_key_type),
    "find-share-coordinator": (10, find_share_coordinator),
    "produce-unknown-topic": (0, produce_unknown_topic),
}
