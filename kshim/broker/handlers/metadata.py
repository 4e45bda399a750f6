"""Metadata (key 3): brokers, topics and partition leaders; auto-creates topics when allowed.

Each topic with a full-data view is followed by its view ``T.full`` (not marked
internal, so tools and Spark list it); a view's name is never auto-created.
"""

from __future__ import annotations

import uuid
from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.full_view.naming import has_view, reserved_for_view, source_of, view_name
from kshim.broker.topics import Topic, TopicError
from kshim.protocol.errors import ErrorCode

UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)
VIEW_ID_NAME = "kshim.full.view"  # a view's topic id is uuid5(its source's id, this)


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    host, port = broker.config.advertised_address()
    node_id = broker.config.node_id
    names = _requested_names(request, context.version)
    allow_create = getattr(request, "allow_auto_topic_creation", True) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    if names is None:
        topics = [
            description
            for topic in broker.topics.topics.values()
            for description in _describe_with_view(topic, node_id)
        ]
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
    view_source = source_of(broker.topics.topics, name)
    if topic is None and view_source is not None:
        return _describe(view_source, node_id, view=True)
    if topic is None and allow_create and not reserved_for_view(name):
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


def _describe_with_view(topic: Topic, node_id: int) -> list[dict[str, Any]]:
    described = [_describe(topic, node_id)]
    if has_view(topic):
        described.append(_describe(topic, node_id, view=True))
    return described


def _describe(topic: Topic, node_id: int, view: bool = False) -> dict[str, Any]:
    """Describes ``topic``, or its view ``T.full`` (same partitions, a derived id)."""
    topic_id = uuid.UUID(bytes=topic.record.topic_id)
    return {
        "error_code": ErrorCode.none,
        "name": view_name(topic.record.name) if view else topic.record.name,
        "topic_id": uuid.uuid5(topic_id, VIEW_ID_NAME) if view else topic_id,
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
