"""CreateTopics (key 19). Names of full-data views are reserved (the topic resolver says
which: ``refuse_creation``). A topic not created is answered as Kafka's controller
answers it: its error and message, and (v5+) no partition count, replication factor or
configs (-1, -1 and an empty list)."""

from __future__ import annotations

import uuid

from kshim.broker.config.describe import describe_created_topic_configs
from kshim.broker.context import RequestContext
from kshim.broker.topic_resolver import NO_TOPIC_ID, TopicConfigs
from kshim.broker.topics import INVALID_REPLICATION_FACTOR, TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

DEFAULT = -1


async def handle(request: CreateTopicsRequest, context: RequestContext) -> CreateTopicsResponse:
    return CreateTopicsResponse(
        throttle_time_ms=0,
        topics=[await _create(topic, request.validate_only, context) for topic in request.topics],
    )


async def _create(
    topic: CreatableTopic, validate_only: bool, context: RequestContext
) -> CreatableTopicResult:
    broker = context.broker
    partitions = topic.num_partitions
    if topic.assignments:
        partitions = len(topic.assignments)
    elif partitions == DEFAULT:
        partitions = broker.config.get_int("num.partitions")
    overrides = {config.name: config.value for config in topic.configs}
    try:
        broker.resolver.refuse_creation(topic.name)
        if topic.replication_factor not in (DEFAULT, 1):
            raise TopicError(INVALID_REPLICATION_FACTOR, "a single broker keeps one replica")
        created = await broker.topics.create(topic.name, partitions, overrides, validate_only)
    except TopicError as error:
        return CreatableTopicResult(
            name=topic.name,
            topic_id=NO_TOPIC_ID,
            error_code=ErrorCode(error.code),
            error_message=str(error),
            configs=[],  # v5+: empty, not null, as Kafka's controller leaves it
        )
    set_here = {name: value for name, value in overrides.items() if value is not None}
    configs = TopicConfigs(
        broker.topics.effective_configs(set_here), frozenset(overrides), read_only=False
    )
    return CreatableTopicResult(
        name=topic.name,
        # validate_only creates no topic, so there is no id yet
        topic_id=NO_TOPIC_ID if created is None else uuid.UUID(bytes=created.record.topic_id),
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=partitions,
        replication_factor=1,
        configs=describe_created_topic_configs(configs, broker.config.static_settings()),
    )
