"""The access rules of the topic admin APIs: CreateTopics, DeleteTopics, CreatePartitions
and DescribeProducers (KafkaApis and, since KRaft, ControllerApis: createTopics,
deleteTopics, createPartitions).

CREATE on the cluster creates any topic, otherwise CREATE on the topic; DELETE on the
cluster deletes any topic, otherwise DELETE on the topic. Partitions are added with
ALTER, producers described with READ on the topic.
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
from kshim.protocol.messages.create_topics import (
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
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

# ControllerApis.createTopics' message for a topic the client may not create.
CREATE_REFUSED = "Authorization failed."
NOT_GIVEN = -1  # partitions and replication factor of a topic not created, or not shown


async def create_topics_rule(
    request: CreateTopicsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[CreateTopicsRequest, CreateTopicsResponse],
) -> CreateTopicsResponse:
    """A refused topic is TOPIC_AUTHORIZATION_FAILED. A created one's configs, partition
    count and replication factor are answered only with DESCRIBE_CONFIGS on it, else its
    topic_config_error_code is TOPIC_AUTHORIZATION_FAILED (KIP-525)."""
    names = [topic.name for topic in request.topics]
    creatable = (
        frozenset(names)
        if permissions.allows_cluster(Operation.CREATE)
        else permissions.topics(Operation.CREATE, names)
    )
    allowed = [topic for topic in request.topics if topic.name in creatable]
    response = CreateTopicsResponse(throttle_time_ms=0, topics=[])
    if allowed:
        response = await handle(dataclasses.replace(request, topics=allowed), context)
    shown = permissions.topics(Operation.DESCRIBE_CONFIGS, creatable)
    for result in response.topics:
        if result.error_code == ErrorCode.none and result.name not in shown:
            result.configs = []
            result.num_partitions = result.replication_factor = NOT_GIVEN
            result.topic_config_error_code = ErrorCode.topic_authorization_failed
    response.topics.extend(
        CreatableTopicResult(
            name=name,
            topic_id=NO_TOPIC_ID,
            error_code=ErrorCode.topic_authorization_failed,
            error_message=CREATE_REFUSED,
            num_partitions=NOT_GIVEN,
            replication_factor=NOT_GIVEN,
            configs=[],
        )
        for name in names
        if name not in creatable
    )
    return response


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
