"""Metadata (key 3): brokers, topics and partition leaders; auto-creates topics when allowed.

Each topic with a full-data view is followed by its view ``T.full`` (not marked
internal, so tools and Spark list it); a view's name is never auto-created (the
topic resolver says which names are views).
"""

from __future__ import annotations

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.topic_resolver import NO_TOPIC_ID, ResolvedTopic
from kshim.broker.topics import TopicError, validate_topic_name
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)


async def handle(request: MetadataRequest, context: RequestContext) -> MetadataResponse:
    broker = context.broker
    host, port = broker.config.advertised_address()
    node_id = broker.config.node_id
    names = _requested_names(request, context.version)
    allow_create = request.allow_auto_topic_creation and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    if names is None:
        topics = [_describe(resolved, node_id) for resolved in broker.resolver.listed()]
    else:
        topics = [await _lookup(broker, name, allow_create, node_id) for name in names]
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=None)],
        cluster_id=broker.config.values["cluster.id"],
        controller_id=node_id,
        topics=topics,
    )


def _requested_names(request: MetadataRequest, version: int) -> list[str | None] | None:
    """None means every topic: a null list (v1+) or, in v0, an empty one."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    return [topic.name for topic in request.topics]


async def _lookup(
    broker: Broker, name: str | None, allow_create: bool, node_id: int
) -> MetadataResponseTopic:
    if name is None:
        return _error(None, ErrorCode.unknown_topic_id)
    resolved = broker.resolver.resolve(name)
    if resolved is None:
        # Kafka answers an illegal name so whether or not it may auto-create topics
        # (KafkaApis.getTopicMetadata).
        try:
            validate_topic_name(name)
        except TopicError as error:
            return _error(name, ErrorCode(error.code))
    if resolved is None and allow_create and broker.resolver.may_create(name):
        try:
            await broker.topics.create(name, broker.config.get_int("num.partitions"), {})
        except TopicError as error:
            if error.code != ErrorCode.topic_already_exists:
                return _error(name, ErrorCode(error.code))
        resolved = broker.resolver.resolve(name)
    if resolved is None:
        return _error(name, ErrorCode.unknown_topic_or_partition)
    return _describe(resolved, node_id)


def _error(name: str | None, code: ErrorCode) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=NO_TOPIC_ID, partitions=[])


def _describe(topic: ResolvedTopic, node_id: int) -> MetadataResponseTopic:
    """A single broker leads every partition and is its only replica."""
    return MetadataResponseTopic(
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=False,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=index,
                leader_id=node_id,
                leader_epoch=0,
                replica_nodes=[node_id],
                isr_nodes=[node_id],
                offline_replicas=[],
            )
            for index in range(topic.partition_count)
        ],
    )
