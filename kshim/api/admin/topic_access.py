"""The access rule of CreateTopics (KafkaApis and, since KRaft, ControllerApis:
createTopics): CREATE on the cluster creates any topic, otherwise CREATE on the topic.
The other topic admin APIs' rules are in topic_admin_access.py, loaded with their routes.
"""

from __future__ import annotations

import dataclasses

from kshim.api.access.permissions import Permissions
from kshim.api.access.rule import Handler
from kshim.api.context import RequestContext
from kshim.broker.topic_resolver import NO_TOPIC_ID
from kshim.protocol.acls import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.create_topics import (
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
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
