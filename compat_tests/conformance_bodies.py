"""Request and response bodies that conformance cases of several modules share: the cases
of the ordinary answers and those of the refusals send the same requests (a join, a
commit, a produce) to get different answers, and expect answers of the same form."""

from __future__ import annotations

from typing import Any

from compat_tests.conformance_probe import (
    ASSIGNMENT,
    INT32_MIN,
    NODE_ID,
    PROTOCOL,
    SESSION_TIMEOUT_MS,
    SUBSCRIPTION,
    Exchange,
    Probe,
)

NULLABLE_PROTOCOL_NAME_V = 7  # JoinGroup's protocol name is nullable from v7 (KIP-559)
NO_OFFSET = NO_LEADER = -1


def join_request(group: str, member_id: str) -> dict[str, Any]:
    """JoinGroup of a consumer with one protocol, as a dynamic member."""
    return {
        "group_id": group,
        "session_timeout": SESSION_TIMEOUT_MS,
        "rebalance_timeout": SESSION_TIMEOUT_MS,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": PROTOCOL, "metadata": SUBSCRIPTION}],
        "reason": None,
    }


def join_refusal(error_code: int, member_id: str, version: int) -> dict[str, Any]:
    """JoinGroup's answer that joins nobody (KIP-394's MEMBER_ID_REQUIRED, an unknown
    member); the protocol name is nullable from v7 (KIP-559), "" before."""
    return {
        "throttle_time": 0,
        "error_code": error_code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if version >= NULLABLE_PROTOCOL_NAME_V else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def sync_request(group: str, generation: int, member_id: str) -> dict[str, Any]:
    """SyncGroup of ``member_id``, which assigns itself ASSIGNMENT."""
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": PROTOCOL,
        "assignments": [{"member_id": member_id, "assignment": ASSIGNMENT}],
    }


def leave_request(group: str, member_id: str) -> dict[str, Any]:
    """LeaveGroup of one dynamic member (v0-2 by its member id, v3+ in the list)."""
    return {
        "group_id": group,
        "member_id": member_id,
        "members": [{"member_id": member_id, "group_instance_id": None, "reason": None}],
    }


def commit_request(
    group: str, topic: str, generation: int, member_id: str, offset: int, metadata: str
) -> dict[str, Any]:
    """OffsetCommit of ``offset`` for partition 0 of ``topic``, with the broker's retention."""
    partition = {"partition_index": 0, "committed_offset": offset, "committed_metadata": metadata}
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [{"name": topic, "partitions": [partition]}],
    }


def offset_fetch_exchange(group: str, topic: str, committed_offset: int, metadata: str) -> Exchange:
    """OffsetFetch of partition 0 of ``topic`` for ``group`` (v0-7 by topic, v8+ by group),
    and its answer: ``committed_offset`` with ``metadata``, no leader epoch."""
    topics = [{"name": topic, "partition_indexes": [0]}]
    request = {
        "group_id": group,
        "topics": topics,
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
        "require_stable": False,
    }
    partition = {
        "partition_index": 0,
        "committed_offset": committed_offset,
        "committed_leader_epoch": -1,
        "metadata": metadata,
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


def produce_request(topic: str, partition: int, records: bytes) -> dict[str, Any]:
    """Produce of one batch to one partition, acknowledged by every in-sync replica."""
    partitions = [{"index": partition, "records": records}]
    return {
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": partitions}],
    }


def produce_refusal(topic: str, partition: int, error_code: int) -> dict[str, Any]:
    """Produce's answer refusing one partition: no offset, no log start, no leader."""
    refused: dict[str, Any] = {
        "index": partition,
        "error_code": error_code,
        "base_offset": NO_OFFSET,
        "log_append_time": None,
        "log_start_offset": NO_OFFSET,
        "record_errors": [],
        "error_message": None,
        "current_leader": {"leader_id": NO_LEADER, "leader_epoch": NO_LEADER},
    }
    return {"throttle_time": 0, "responses": [{"name": topic, "partition_responses": [refused]}]}


# Metadata's partition 0 on a single node, which leads it and is its only replica.
LED_PARTITION = {
    "error_code": 0,
    "partition_index": 0,
    "leader_id": NODE_ID,
    "leader_epoch": 0,
    "replica_nodes": [NODE_ID],
    "isr_nodes": [NODE_ID],
    "offline_replicas": [],
}


def metadata_answer(probe: Probe, cluster_id: Any, topic: dict[str, Any]) -> dict[str, Any]:
    """Metadata's answer describing ``topic`` on the probed single-node cluster."""
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": NODE_ID, "host": probe.host, "port": probe.port}],
        "cluster_id": cluster_id,
        "controller_id": NODE_ID,
        "topics": [topic],
        "cluster_authorized_operations": INT32_MIN,
    }
