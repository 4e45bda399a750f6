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

from kshim.api.admin.services import TopicServices
from kshim.api.context import RequestContext
from kshim.broker.topics import MAX_RECORDS_PER_REQUEST, PastOneBatch, TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)


async def handle(
    request: CreatePartitionsRequest, context: RequestContext[TopicServices]
) -> CreatePartitionsResponse:
    room = MAX_RECORDS_PER_REQUEST  # partition records the request may still add
    results = []
    for topic in request.topics:
        result, added = await _add(topic, request.validate_only, context, room)
        results.append(result)
        room -= added
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


async def _add(
    topic: CreatePartitionsTopic,
    validate_only: bool,
    context: RequestContext[TopicServices],
    room: int,
) -> tuple[CreatePartitionsTopicResult, int]:
    """The topic's result and how much of the batch's ``room`` it takes (all of it when it
    does not fit: Kafka fills its batch before refusing)."""
    resolver = context.broker.resolver
    try:
        resolved = resolver.resolve(topic.name)
        if resolved is None:  # Kafka's controller sends the error alone, with no message
            result = CreatePartitionsTopicResult(
                name=topic.name, error_code=ErrorCode.unknown_topic_or_partition
            )
            return result, 0
        resolved.refuse_change("add partitions to its topic instead")
        placement = (
            None
            if topic.assignments is None
            else [assignment.broker_ids for assignment in topic.assignments]
        )
        added = await context.broker.topics.add_partitions(
            topic.name, topic.count, validate_only, placement, room
        )
        if not validate_only:
            await resolver.grow_companions(topic.name, topic.count)
    except PastOneBatch:
        result = CreatePartitionsTopicResult(
            name=topic.name, error_code=ErrorCode.unknown_server_error, error_message=None
        )
        return result, room
    except TopicError as error:
        result = CreatePartitionsTopicResult(
            name=topic.name, error_code=ErrorCode(error.code), error_message=str(error)
        )
        return result, 0
    return CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.none), added
