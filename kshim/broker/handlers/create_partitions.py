"""CreatePartitions (key 37). A topic's delay companion grows with it (a record produced
to partition p of ``T.delay`` is delivered to partition p of ``T``); views and companions
are refused (the topic resolver says which).

As Kafka's controller, the topics of one request share one batch of records, a partition
record per partition added (``MAX_RECORDS_PER_REQUEST``): a topic that does not fit is
UNKNOWN_SERVER_ERROR with no message, as Kafka 3.9 answers, and adds nothing. Kafka fills
its batch up to the limit before it refuses, so every later topic that adds a partition
finds it full. (Kafka 3.9 also writes the records that fit of a refused topic; kshim
writes none.)"""

from __future__ import annotations

from dataclasses import dataclass

from kshim.broker.context import RequestContext
from kshim.broker.topics import MAX_RECORDS_PER_REQUEST, PastOneBatch, TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)


@dataclass(slots=True)
class _Batch:
    """The partition records one request may still add."""

    room: int = MAX_RECORDS_PER_REQUEST


async def handle(
    request: CreatePartitionsRequest, context: RequestContext
) -> CreatePartitionsResponse:
    batch = _Batch()
    return CreatePartitionsResponse(
        throttle_time_ms=0,
        results=[
            await _add(topic, request.validate_only, context, batch) for topic in request.topics
        ],
    )


async def _add(
    topic: CreatePartitionsTopic, validate_only: bool, context: RequestContext, batch: _Batch
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
        batch.room -= await context.broker.topics.add_partitions(
            topic.name, topic.count, validate_only, placement, batch.room
        )
        if not validate_only:
            await resolver.grow_companions(topic.name, topic.count)
    except PastOneBatch:
        batch.room = 0
        return CreatePartitionsTopicResult(
            name=topic.name, error_code=ErrorCode.unknown_server_error, error_message=None
        )
    except TopicError as error:
        return CreatePartitionsTopicResult(
            name=topic.name, error_code=ErrorCode(error.code), error_message=str(error)
        )
    return CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.none)
