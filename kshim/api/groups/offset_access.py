"""The access rule of OffsetFetch (KafkaApis.handleOffsetFetchRequest): a group's offsets
are fetched with DESCRIBE on the group, and a topic's with DESCRIBE on the topic.

A refused group is GROUP_AUTHORIZATION_FAILED (v1 has no error of its own for a request,
so each partition asked for carries it: OffsetFetchRequest.getErrorResponse). Of an
allowed group, a topic asked for by name without DESCRIBE is TOPIC_AUTHORIZATION_FAILED,
and a request for all the group's offsets leaves such topics out; when the group
coordinator answers an error for the whole group, that error is the answer. v8+ asks
for several groups at once (KIP-709), each decided on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kshim.api.access.permissions import Permissions
from kshim.api.access.refusals import split_topics
from kshim.api.access.rule import Handler
from kshim.api.context import RequestContext
from kshim.api.groups import offset_fetch
from kshim.protocol.acls import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages import offset_fetch as messages

FIRST_WITH_REQUEST_ERROR = 2
NO_OFFSET = -1
NO_LEADER_EPOCH = -1
NO_METADATA = ""

RequestTopic = TypeVar(
    "RequestTopic", messages.OffsetFetchRequestTopic, messages.OffsetFetchRequestTopics
)
ResponseTopic = TypeVar(
    "ResponseTopic", messages.OffsetFetchResponseTopic, messages.OffsetFetchResponseTopics
)


async def offset_fetch_rule(
    request: messages.OffsetFetchRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[messages.OffsetFetchRequest, messages.OffsetFetchResponse],
) -> messages.OffsetFetchResponse:
    if context.version >= offset_fetch.FIRST_BATCHED_VERSION:
        return await _batched(request, context, permissions, handle)
    if not permissions.allows_group(Operation.DESCRIBE, request.group_id):
        return _refused_group(request, context.version)
    if request.topics is None:
        response = await handle(request, context)
        if response.error_code == ErrorCode.none:
            response.topics = _describable(response.topics, permissions)
        return response
    allowed, denied = split_topics(permissions, Operation.DESCRIBE, request.topics)
    response = await handle(dataclasses.replace(request, topics=allowed), context)
    if response.error_code == ErrorCode.none:
        response.topics.extend(
            _refused_topics(
                denied,
                ErrorCode.topic_authorization_failed,
                messages.OffsetFetchResponseTopic,
                messages.OffsetFetchResponsePartition,
            )
        )
    return response


def _refused_group(
    request: messages.OffsetFetchRequest, version: int
) -> messages.OffsetFetchResponse:
    error = ErrorCode.group_authorization_failed
    if version >= FIRST_WITH_REQUEST_ERROR:
        return messages.OffsetFetchResponse(
            throttle_time_ms=0, groups=[], topics=[], error_code=error
        )
    topics = _refused_topics(
        request.topics or (),
        error,
        messages.OffsetFetchResponseTopic,
        messages.OffsetFetchResponsePartition,
    )
    return messages.OffsetFetchResponse(
        throttle_time_ms=0, groups=[], topics=topics, error_code=error
    )


async def _batched(
    request: messages.OffsetFetchRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[messages.OffsetFetchRequest, messages.OffsetFetchResponse],
) -> messages.OffsetFetchResponse:
    """Each group decided on its own; the handler answers the allowed ones, one answer per
    group in the order asked, and the refusals take their places."""
    decisions = [
        permissions.allows_group(Operation.DESCRIBE, group.group_id) for group in request.groups
    ]
    allowed = [
        _narrowed(group, permissions)
        for group, ok in zip(request.groups, decisions, strict=True)
        if ok
    ]
    answered: list[messages.OffsetFetchResponseGroup] = []
    if allowed:
        response = await handle(dataclasses.replace(request, groups=allowed), context)
        answered = response.groups
    if len(answered) != len(allowed):
        raise AssertionError("OffsetFetch answers each group asked for, in order")
    answers = iter(answered)
    groups = [
        _completed(group, next(answers), permissions)
        if ok
        else messages.OffsetFetchResponseGroup(
            group_id=group.group_id, topics=[], error_code=ErrorCode.group_authorization_failed
        )
        for group, ok in zip(request.groups, decisions, strict=True)
    ]
    return messages.OffsetFetchResponse(throttle_time_ms=0, groups=groups, topics=[])


def _narrowed(
    group: messages.OffsetFetchRequestGroup, permissions: Permissions
) -> messages.OffsetFetchRequestGroup:
    if group.topics is None:
        return group
    allowed, _ = split_topics(permissions, Operation.DESCRIBE, group.topics)
    return dataclasses.replace(group, topics=allowed)


def _completed(
    asked: messages.OffsetFetchRequestGroup,
    answer: messages.OffsetFetchResponseGroup,
    permissions: Permissions,
) -> messages.OffsetFetchResponseGroup:
    """One allowed group's answer: the topics it may not see left out (all offsets asked
    for) or refused (asked for by name)."""
    if answer.error_code != ErrorCode.none:
        return answer
    if asked.topics is None:
        answer.topics = _describable(answer.topics, permissions)
        return answer
    _, denied = split_topics(permissions, Operation.DESCRIBE, asked.topics)
    answer.topics.extend(
        _refused_topics(
            denied,
            ErrorCode.topic_authorization_failed,
            messages.OffsetFetchResponseTopics,
            messages.OffsetFetchResponsePartitions,
        )
    )
    return answer


def _describable(topics: list[ResponseTopic], permissions: Permissions) -> list[ResponseTopic]:
    describable = permissions.topics(Operation.DESCRIBE, (topic.name for topic in topics))
    return [topic for topic in topics if topic.name in describable]


Partition = TypeVar(
    "Partition", messages.OffsetFetchResponsePartition, messages.OffsetFetchResponsePartitions
)


def _refused_topics(
    topics: Iterable[RequestTopic],
    error: ErrorCode,
    topic_class: Callable[..., ResponseTopic],
    partition_class: type[Partition],
) -> list[ResponseTopic]:
    """Each topic's answer with ``error`` for every partition it names; the two classes
    are one version's (OffsetFetch v8 renamed them for its batched groups)."""
    return [
        topic_class(
            name=topic.name,
            partitions=_refused_partitions(topic.partition_indexes, error, partition_class),
        )
        for topic in topics
    ]


def _refused_partitions(
    indexes: Sequence[int], error: ErrorCode, partition_class: type[Partition]
) -> list[Partition]:
    """Kafka's answer for a partition it did not look up: no offset, epoch or metadata."""
    return [
        partition_class(
            partition_index=index,
            committed_offset=NO_OFFSET,
            committed_leader_epoch=NO_LEADER_EPOCH,
            metadata=NO_METADATA,
            error_code=error,
        )
        for index in indexes
    ]
