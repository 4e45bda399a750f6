"""Conformance cases for refusals of the group and transaction coordinators and of the
config APIs: unknown members and transactional ids, stale epochs, a transaction ended
with nothing in it, an unknown topic's configs."""

from __future__ import annotations

import datetime
from typing import Any

from compat_tests.conformance_bodies import (
    commit_request,
    leave_request,
    produce_refusal,
    produce_request,
    sync_request,
)
from compat_tests.conformance_probe import (
    NODE_ID,
    TOPIC_RESOURCE,
    Exchange,
    Probe,
    add_partitions_request,
    record_batch,
    transactional_request,
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
NOWHERE = {"node_id": NO_NODE, "host": "", "port": NO_NODE}  # FindCoordinator: no node
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
    request = sync_request(group, generation, "not-a-member")
    refused = _answer(
        error_code=UNKNOWN_MEMBER_ID, protocol_type=None, protocol_name=None, assignment=b""
    )
    return Exchange(request, refused)


def leave_unknown_member(probe: Probe, version: int) -> Exchange:
    group = probe.name("leave-unknown")
    probe.join(group)
    request = leave_request(group, "not-a-member")
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
    request = commit_request(group, missing, -1, "", 1, "")
    refused = {"partition_index": 0, "error_code": UNKNOWN_TOPIC_OR_PARTITION}
    return Exchange(request, _answer(topics=[{"name": missing, "partitions": [refused]}]))


def end_empty_transaction(probe: Probe, version: int) -> Exchange:
    transactional_id = probe.name("txn-empty")
    producer = probe.init_producer(transactional_id)
    request = transactional_request(transactional_id, producer, committed=True)
    # Kafka's coordinator refuses to end a transaction in state Empty, either way.
    return Exchange(request, _answer(error_code=INVALID_TXN_STATE))


def add_partitions_old_epoch(probe: Probe, version: int) -> Exchange:
    topic, transactional_id = probe.create_topic("old-epoch"), probe.name("txn-old-epoch")
    first = probe.init_producer(transactional_id)
    probe.init_producer(transactional_id)  # bumps the epoch: the first one is fenced
    request = add_partitions_request(transactional_id, first, topic)
    fenced = PRODUCER_FENCED if version >= FIRST_PRODUCER_FENCED_V else INVALID_PRODUCER_EPOCH
    return Exchange(request, _added(topic, fenced))


def _added(topic: str, error_code: int) -> Any:
    result = {"partition_index": 0, "partition_error_code": error_code}
    topics = [{"name": topic, "results_by_partition": [result]}]
    return _answer(results_by_topic_v3_and_below=topics)


def add_partitions_unknown_topic(probe: Probe, version: int) -> Exchange:
    transactional_id, missing = probe.name("txn-missing"), probe.name("missing")
    producer = probe.init_producer(transactional_id)
    request = add_partitions_request(transactional_id, producer, missing)
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
    request = _alter_configs([(missing, "retention.ms", "1000")])
    return Exchange(request, _unknown_topic(missing))


def _alter_configs(changes: list[tuple[str, str, str | None]]) -> dict[str, Any]:
    """AlterConfigs setting one config (name, value) on each topic of ``changes``."""
    resources = [
        {
            "resource_type": TOPIC_RESOURCE,
            "resource_name": topic,
            "configs": [{"name": name, "value": value}],
        }
        for topic, name, value in changes
    ]
    return {"resources": resources, "validate_only": False}


def _unknown_topic(missing: str) -> Any:
    """Kafka's words for a topic to configure that does not exist (ZkAdminManager's)."""
    message = f"The topic '{missing}' does not exist."
    return _refused_config(missing, UNKNOWN_TOPIC_OR_PARTITION, message)


def _refused_config(topic: str, error_code: int, message: str) -> Any:
    return _answer(responses=[_config_refusal(topic, error_code, message)])


def _config_refusal(topic: str, error_code: int, message: str) -> dict[str, Any]:
    return {
        "error_code": error_code,
        "error_message": message,
        "resource_type": TOPIC_RESOURCE,
        "resource_name": topic,
    }


def _incremental_change(topic: str, name: str, operation: int, value: str) -> dict[str, Any]:
    """IncrementalAlterConfigs of one config of ``topic``."""
    change = {"name": name, "config_operation": operation, "value": value}
    resource = {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [change]}
    return {"resources": [resource], "validate_only": False}


def incremental_unknown_topic(probe: Probe, version: int) -> Exchange:
    missing = probe.name("missing")
    request = _incremental_change(missing, "retention.ms", INCREMENTAL_SET, "1000")
    return Exchange(request, _unknown_topic(missing))


def incremental_bad_value(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("incremental-bad")
    request = _incremental_change(topic, "cleanup.policy", INCREMENTAL_SET, "sometimes")
    return Exchange(request, _refused_config(topic, INVALID_CONFIG, f"{SOMETIMES}: {POLICIES}"))


def incremental_append_to_a_number(probe: Probe, version: int) -> Exchange:
    """APPEND and SUBTRACT are for LIST configs only."""
    topic = probe.create_topic("incremental-append")
    request = _incremental_change(topic, "segment.bytes", INCREMENTAL_APPEND, "1")
    message = "Can't APPEND to key segment.bytes because its type is not LIST."
    return Exchange(request, _refused_config(topic, INVALID_CONFIG, message))


def alter_configs_refusals(probe: Probe, version: int) -> Exchange:
    """Three topics: a value under its minimum (Kafka's Range), a config Kafka does not
    know, and a null value (a malformed request) for a topic that does not exist. (A
    topic named twice in one AlterConfigs request gets no answer at all from Kafka 3.9.)"""
    first, second = probe.create_topic("alter-range"), probe.create_topic("alter-unknown")
    missing = probe.name("missing")
    request = _alter_configs(
        [
            (first, "segment.bytes", "13"),
            (second, "no.such.config", "1"),
            (missing, "retention.ms", None),
        ]
    )
    refused = [
        (first, INVALID_CONFIG, "Invalid value 13 for configuration segment.bytes: "
         "Value must be at least 14"),
        (second, INVALID_CONFIG, "Unknown topic config name: no.such.config"),
        (missing, INVALID_REQUEST, "Null value not supported for : retention.ms"),
    ]  # fmt: skip
    results = [_config_refusal(*refusal) for refusal in refused]
    return Exchange(request, _answer(responses=results))


def _found_at_version_0(probe: Probe) -> Any:
    """FindCoordinator v0 has no key type: every key is a group's, coordinated here."""
    return _answer(error_code=0, node_id=NODE_ID, host=probe.host, port=probe.port)


def find_unknown_key_type(probe: Probe, version: int) -> Exchange:
    """v0 has no key type (a group is looked up and found); v1+ refuse a type Kafka does
    not know, the whole request with INVALID_REQUEST and that error's own message."""
    key = probe.name("key")
    request = {"key": key, "key_type": UNKNOWN_KEY_TYPE, "coordinator_keys": [key]}
    if version == 0:
        return Exchange(request, _found_at_version_0(probe))
    refused = {"error_code": INVALID_REQUEST, "error_message": MALFORMED, **NOWHERE}
    return Exchange(request, _answer(**refused, coordinators=[{"key": key, **refused}]))


def find_share_coordinator(probe: Probe, version: int) -> Exchange:
    """Key type 2 asks for a share group's coordinator (KIP-932); v0 has no key type."""
    key = probe.name("share")
    request = {"key": key, "key_type": SHARE_KEY_TYPE, "coordinator_keys": [key]}
    if version == 0:
        return Exchange(request, _found_at_version_0(probe))
    if version < FIRST_BATCHED_FIND_V:  # the whole request fails
        refused = {"error_code": INVALID_REQUEST, "error_message": MALFORMED, **NOWHERE}
        return Exchange(request, _answer(**refused))
    # Kafka 3.9 has no share coordinator yet (v6 may ask for one); v4-5 may not ask.
    error = COORDINATOR_NOT_AVAILABLE if version >= FIRST_SHARE_V else INVALID_REQUEST
    per_key = {"key": key, "error_code": error, "error_message": "", **NOWHERE}
    return Exchange(request, _answer(coordinators=[per_key]))


def produce_unknown_topic(probe: Probe, version: int) -> Exchange:
    """Produce creates no topic, whatever auto.create.topics.enable says."""
    missing = probe.name("missing")
    request = produce_request(missing, 0, record_batch(1))
    refused = produce_refusal(missing, 0, UNKNOWN_TOPIC_OR_PARTITION)
    return Exchange(request, lambda _: refused)


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
