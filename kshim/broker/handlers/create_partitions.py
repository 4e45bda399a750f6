"""CreatePartitions (key 37). A topic's delay companion grows with it (a record produced
to partition p of ``T.delay`` is delivered to partition p of ``T``); views and companions
are refused (the topic resolver says which)."""

from __future__ import annotations

from kshim.broker.context import RequestContext
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)


async def handle(
    request: CreatePartitionsRequest, context: RequestContext
) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        throttle_time_ms=0,
        results=[await _add(topic, request.validate_only, context) for topic in request.topics],
    )


async def _add(
    topic: CreatePartitionsTopic, validate_only: bool, context: RequestContext
) -> CreatePartitionsTopicResult:
    resolver = context.broker.resolver
    try:
        resolved = resolver.resolve(topic.name)
        if resolved is None:  # Kafka's controller sends the error alone, with no message
            return CreatePartitionsTopicResult(
                name=topic.name, error_code=ErrorCode.unknown_topic_or_partition
            )
        resolved.refuse_change("add partitions to its topic instead")
        placement = (
            None
            if topic.assignments is None
            else [assignment.broker_ids for assignment in topic.assignments]
        )
        await context.broker.topics.add_partitions(
            topic.name, topic.count, validate_only, placement
        )
        if not validate_only:
            await resolver.grow_companions(topic.name, topic.count)
    except TopicError as error:
        return CreatePartitionsTopicResult(
            name=topic.name, error_code=ErrorCode(error.code), error_message=str(error)
        )
    return CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.none)
