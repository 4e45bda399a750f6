"""Metadata (key 3): brokers, topics and partition leaders; auto-creates topics when allowed."""

from __future__ import annotations

import uuid
from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.state import Broker
from kshim.broker.topics import Topic, TopicError
from kshim.protocol.errors import ErrorCode

UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    host, port = broker.config.advertised_address()
    node_id = broker.config.node_id
    names = _requested_names(request, context.version)
    allow_create = getattr(request, "allow_auto_topic_creation", True) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    if names is None:
        topics = [_describe(topic, node_id) for topic in broker.topics.topics.values()]
    else:
        topics = [await _lookup(broker, name, allow_create, node_id) for name in names]
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": node_id, "host": host, "port": port, "rack": None}],
        "cluster_id": broker.config.values["cluster.id"],
        "controller_id": node_id,
        "topics": topics,
        "cluster_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS,
    }


def _requested_names(request: Any, version: int) -> list[str] | None:
    """None means every topic: a null list (v1+) or, in v0, an empty one."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    return [topic.name for topic in request.topics]


async def _lookup(
    broker: Broker, name: str | None, allow_create: bool, node_id: int
) -> dict[str, Any]:
    if name is None:
        return _error(None, ErrorCode.unknown_topic_id)
    topic = broker.topic(name)
    if topic is None and allow_create:
        try:
            partitions = broker.config.get_int("num.partitions")
            topic = await broker.topics.create(name, partitions, {})
        except TopicError as error:
            if error.code != ErrorCode.topic_already_exists:
                return _error(name, ErrorCode(error.code))
            topic = broker.topic(name)
    if topic is None:
        return _error(name, ErrorCode.unknown_topic_or_partition)
    return _describe(topic, node_id)


def _error(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": uuid.UUID(int=0), "partitions": []}


def _describe(topic: Topic, node_id: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.record.name,
        "topic_id": uuid.UUID(bytes=topic.record.topic_id),
        "is_internal": False,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": index,
                "leader_id": node_id,
                "leader_epoch": 0,
                "replica_nodes": [node_id],
                "isr_nodes": [node_id],
                "offline_replicas": [],
            }
            for index in range(topic.record.partitions)
        ],
        "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS,
    }
