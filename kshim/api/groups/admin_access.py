"""The access rules of the group administration APIs (DescribeGroups, ListGroups,
DeleteGroups, OffsetDelete; KafkaApis' handleDescribeGroupsRequest and the rest), apart from
the members' (access.py): their route is loaded at their first request (api/routes.py).

An admin DESCRIBE on a group describes it or sees it listed, DELETE deletes it or its
offsets; offsets of a topic are deleted with READ on the topic.
"""

from __future__ import annotations

import dataclasses

from kshim.api.access.permissions import Permissions
from kshim.api.access.refusals import (
    Listing,
    item_by_item,
    partition_by_partition,
    refused_unless,
    split,
    split_topics,
)
from kshim.api.access.rule import Handler
from kshim.api.context import RequestContext
from kshim.api.groups import describe_groups
from kshim.api.groups.access import UNKNOWN_PROTOCOL, UNKNOWN_STATE
from kshim.protocol.acls import Operation, ResourceType
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kshim.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kshim.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kshim.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kshim.protocol.metadata_response import UNKNOWN_AUTHORIZED_OPERATIONS


async def describe_groups_rule(
    request: DescribeGroupsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[DescribeGroupsRequest, DescribeGroupsResponse],
) -> DescribeGroupsResponse:
    """Each group needs DESCRIBE, or it is described as Kafka's groupError. KIP-430's
    operations, when asked for, are the principal's on each group described."""
    allowed, denied = split(
        request.groups, lambda group: permissions.allows_group(Operation.DESCRIBE, group)
    )
    refused = [_refused_group(group) for group in denied]
    if not allowed:
        return DescribeGroupsResponse(throttle_time_ms=0, groups=refused)
    # The handler is not asked for operations: they are the principal's, put in here.
    narrowed = dataclasses.replace(request, groups=allowed, include_authorized_operations=False)
    response = await handle(narrowed, context)
    if describe_groups.asks_operations(request, context.version):
        response.groups[:] = describe_groups.with_operations(
            response.groups, lambda group_id: permissions.operations(ResourceType.GROUP, group_id)
        )
    response.groups.extend(refused)
    return response


def _refused_group(group_id: str) -> DescribedGroup:
    return DescribedGroup(
        error_code=ErrorCode.group_authorization_failed,
        group_id=group_id,
        group_state=UNKNOWN_STATE,
        protocol_type=UNKNOWN_PROTOCOL,
        protocol_data=UNKNOWN_PROTOCOL,
        members=[],
        authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


async def list_groups_rule(
    request: ListGroupsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[ListGroupsRequest, ListGroupsResponse],
) -> ListGroupsResponse:
    """DESCRIBE on the cluster lists every group; otherwise the groups the client may
    DESCRIBE are listed, and no others."""
    response = await handle(request, context)
    if not permissions.allows_cluster(Operation.DESCRIBE):
        response.groups = [
            group
            for group in response.groups
            if permissions.allows_group(Operation.DESCRIBE, group.group_id)
        ]
    return response


def _deletes_group(permissions: Permissions, group_id: str) -> bool:
    return permissions.allows_group(Operation.DELETE, group_id)


def _refused_deletion(group_id: str, error: ErrorCode) -> DeletableGroupResult:
    return DeletableGroupResult(group_id=group_id, error_code=error)


# Each group needs DELETE, or it is GROUP_AUTHORIZATION_FAILED.
delete_groups_rule = item_by_item(
    Listing(DeleteGroupsRequest, "groups_names", DeleteGroupsResponse, "results"),
    refused_unless(_deletes_group, ErrorCode.group_authorization_failed),
    _refused_deletion,
)


async def offset_delete_rule(
    request: OffsetDeleteRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[OffsetDeleteRequest, OffsetDeleteResponse],
) -> OffsetDeleteResponse:
    """DELETE on the group, or the request is GROUP_AUTHORIZATION_FAILED; then READ on
    each topic, or its partitions are TOPIC_AUTHORIZATION_FAILED (unless the group
    coordinator answers an error for the whole group)."""
    if not permissions.allows_group(Operation.DELETE, request.group_id):
        return OffsetDeleteResponse(
            error_code=ErrorCode.group_authorization_failed, throttle_time_ms=0, topics=[]
        )
    allowed, denied = split_topics(permissions, Operation.READ, request.topics)
    response = await handle(dataclasses.replace(request, topics=allowed), context)
    if response.error_code == ErrorCode.none:
        refused = partition_by_partition(OffsetDeleteResponseTopic, OffsetDeleteResponsePartition)
        response.topics.extend(
            refused(topic, ErrorCode.topic_authorization_failed) for topic in denied
        )
    return response
