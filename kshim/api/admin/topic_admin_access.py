"""The access rules of DeleteTopics, CreatePartitions and DescribeProducers (KafkaApis
and, since KRaft, ControllerApis: deleteTopics, createPartitions), loaded with their
routes at their first request (api/routes.py).

DELETE on the cluster deletes any topic, otherwise DELETE on the topic. Partitions are
added with ALTER, producers described with READ on the topic.
"""

from __future__ import annotations

import dataclasses
import uuid

from kshim.api.access.permissions import TOPIC_REFUSED, Permissions
from kshim.api.access.refusals import Listing, item_by_item, topics_need
from kshim.api.access.rule import Handler
from kshim.api.admin import delete_topics
from kshim.api.context import RequestContext
from kshim.broker.topic_resolver import NO_TOPIC_ID, TopicResolver
from kshim.protocol.acls import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from kshim.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from kshim.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    TopicRequest,
    TopicResponse,
)


async def delete_topics_rule(
    request: DeleteTopicsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[DeleteTopicsRequest, DeleteTopicsResponse],
) -> DeleteTopicsResponse:
    """As ControllerApis.deleteTopics: a topic named without DESCRIBE is
    TOPIC_AUTHORIZATION_FAILED whether or not it exists, one the client may DESCRIBE but
    not DELETE too; a topic given by id without DELETE is TOPIC_AUTHORIZATION_FAILED, its
    name answered only with DESCRIBE. Unknown names and ids are the handler's to answer."""
    if permissions.allows_cluster(Operation.DELETE):
        return await handle(request, context)
    by_id = context.version >= delete_topics.FIRST_VERSION_WITH_TOPIC_IDS
    targets = (
        request.topics if by_id else [DeleteTopicState(name=name) for name in request.topic_names]
    )
    resolver = context.broker.resolver
    allowed: list[DeleteTopicState] = []
    refused: list[DeletableTopicResult] = []
    for target in targets:
        refusal = _deletion_refusal(target, resolver, permissions)
        if refusal is None:
            allowed.append(target)
        else:
            refused.append(refusal)
    response = DeleteTopicsResponse(throttle_time_ms=0, responses=[])
    if allowed:
        if by_id:
            narrowed = dataclasses.replace(request, topics=allowed)
        else:
            names = [target.name for target in allowed if target.name is not None]
            narrowed = dataclasses.replace(request, topic_names=names)
        response = await handle(narrowed, context)
    response.responses.extend(refused)
    return response


def _deletion_refusal(
    target: DeleteTopicState, resolver: TopicResolver, permissions: Permissions
) -> DeletableTopicResult | None:
    name = target.name
    if name is None:
        if target.topic_id is None or target.topic_id == NO_TOPIC_ID:
            return None  # names no topic: the handler's to answer
        found = resolver.resolve_id(target.topic_id)
        if found is None or permissions.allows_topic(Operation.DELETE, found.name):
            return None
        shown = found.name if permissions.allows_topic(Operation.DESCRIBE, found.name) else None
        return _refused_deletion(shown, target.topic_id)
    if not permissions.allows_topic(Operation.DESCRIBE, name):
        return _refused_deletion(name, NO_TOPIC_ID)
    if resolver.resolve(name) is None or permissions.allows_topic(Operation.DELETE, name):
        return None
    return _refused_deletion(name, NO_TOPIC_ID)


def _refused_deletion(name: str | None, topic_id: uuid.UUID) -> DeletableTopicResult:
    return DeletableTopicResult(
        name=name,
        topic_id=topic_id,
        error_code=ErrorCode.topic_authorization_failed,
        error_message=TOPIC_REFUSED,
    )


def _refused_growth(topic: CreatePartitionsTopic, error: ErrorCode) -> CreatePartitionsTopicResult:
    # No message, as ControllerApis.createPartitions answers.
    return CreatePartitionsTopicResult(name=topic.name, error_code=error)


# Each topic needs ALTER, or it is TOPIC_AUTHORIZATION_FAILED.
create_partitions_rule = item_by_item(
    Listing(CreatePartitionsRequest, "topics", CreatePartitionsResponse, "results"),
    topics_need(Operation.ALTER),
    _refused_growth,
)


def _refused_producers(topic: TopicRequest, error: ErrorCode) -> TopicResponse:
    return TopicResponse(
        name=topic.name,
        partitions=[
            PartitionResponse(
                partition_index=index,
                error_code=error,
                error_message=TOPIC_REFUSED,
                active_producers=[],
            )
            for index in topic.partition_indexes
        ],
    )


# Each topic needs READ, or its partitions are TOPIC_AUTHORIZATION_FAILED.
describe_producers_rule = item_by_item(
    Listing(DescribeProducersRequest, "topics", DescribeProducersResponse, "topics"),
    topics_need(Operation.READ),
    _refused_producers,
)
