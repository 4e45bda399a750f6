"""DeleteTopics (key 20): by name (v0-5) or by name or topic id (v6).

A topic not found is refused with the message Kafka's controller gives it (v5+), its
error's own (``new ApiError(error)``, Errors.java).
"""

from __future__ import annotations

import uuid

from kshim.api.admin.services import DeletesTopics
from kshim.api.context import RequestContext
from kshim.broker.topic_resolver import NO_TOPIC_ID
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

# KIP-516: v6 names each topic by name or by topic id (``topics``) instead of by name only
# (``topic_names``).
FIRST_VERSION_WITH_TOPIC_IDS = 6
UNKNOWN_TOPIC = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID = "This server does not host this topic ID."


async def handle(
    request: DeleteTopicsRequest, context: RequestContext[DeletesTopics]
) -> DeleteTopicsResponse:
    targets: list[tuple[str | None, uuid.UUID | None]]
    if context.version >= FIRST_VERSION_WITH_TOPIC_IDS:
        targets = [(topic.name, topic.topic_id) for topic in request.topics]
    else:
        targets = [(name, None) for name in request.topic_names]
    return DeleteTopicsResponse(
        throttle_time_ms=0,
        responses=[await _delete(context.broker, name, topic_id) for name, topic_id in targets],
    )


async def _delete(
    broker: DeletesTopics, name: str | None, topic_id: uuid.UUID | None
) -> DeletableTopicResult:
    if name is None and topic_id is not None and topic_id != NO_TOPIC_ID:
        by_id = broker.resolver.resolve_id(topic_id)
        if by_id is None:
            return _result(None, topic_id, ErrorCode.unknown_topic_id, UNKNOWN_TOPIC_ID)
        name = by_id.name
    topic_id = topic_id or NO_TOPIC_ID
    resolved = broker.resolver.resolve(name or "")
    if resolved is None:
        return _result(name, topic_id, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC)
    try:
        resolved.refuse_deletion()
    except TopicError as error:
        return _result(name, topic_id, ErrorCode(error.code), str(error))
    topic_id = resolved.topic_id
    try:
        await broker.partitions.delete_topic(resolved.name)
    except TopicError as error:
        return _result(name, topic_id, ErrorCode(error.code), str(error))
    return _result(name, topic_id, ErrorCode.none)


def _result(
    name: str | None, topic_id: uuid.UUID, error: ErrorCode, message: str | None = None
) -> DeletableTopicResult:
    return DeletableTopicResult(
        name=name, topic_id=topic_id, error_code=error, error_message=message
    )
