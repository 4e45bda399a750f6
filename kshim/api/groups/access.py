"""The access rules of the consumer group APIs and of FindCoordinator (KafkaApis'
group handlers: handleJoinGroupRequest, handleOffsetCommitRequest, handleOffsetFetchRequest
and the rest).

A member needs READ on its group to join, sync, heartbeat, leave and commit; DESCRIBE to
find its coordinator or fetch its offsets; an admin DESCRIBE to describe a group or see
it listed, DELETE to delete it or its offsets. Offsets of a topic are committed with READ
on the topic, fetched with DESCRIBE, and deleted with READ.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from kshim.api.access.permissions import GROUP_REFUSED, TRANSACTIONAL_ID_REFUSED, Permissions
from kshim.api.access.refusals import (
    Listing,
    item_by_item,
    partition_by_partition,
    refused_unless,
    split,
    split_topics,
    topics_need,
    whole_first,
)
from kshim.api.access.rule import Handler, all_or_nothing
from kshim.api.context import RequestContext
from kshim.api.groups import describe_groups, find_coordinator, join_group
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
from kshim.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kshim.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kshim.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kshim.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kshim.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kshim.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kshim.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kshim.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kshim.protocol.metadata_response import UNKNOWN_AUTHORIZED_OPERATIONS

FIRST_BATCHED_FIND_COORDINATOR = 4  # KIP-699
NO_GENERATION = -1
NO_MEMBER = ""
NO_NODE, NO_HOST, NO_PORT = -1, "", -1  # Kafka's Node.noNode()
UNKNOWN_STATE = UNKNOWN_PROTOCOL = ""  # DescribeGroupsResponse.groupError's
# FindCoordinator v0-3 answers a refusal with the error's message (prepareOldResponse).
_COORDINATOR_REFUSALS = {
    ErrorCode.group_authorization_failed: GROUP_REFUSED,
    ErrorCode.transactional_id_authorization_failed: TRANSACTIONAL_ID_REFUSED,
}


class _GroupRequest(Protocol):
    """A request of one member of one group."""

    @property
    def group_id(self) -> str: ...


def _reads_group(permissions: Permissions, request: _GroupRequest) -> bool:
    return permissions.allows_group(Operation.READ, request.group_id)


def _refused_join(_request: JoinGroupRequest, context: RequestContext) -> JoinGroupResponse:
    # JoinGroupRequest.getErrorResponse: no member id, leader, generation or members.
    nullable_protocol = context.version >= join_group.FIRST_NULLABLE_PROTOCOL_VERSION
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.group_authorization_failed,
        generation_id=NO_GENERATION,
        protocol_type=None,
        protocol_name=None if nullable_protocol else UNKNOWN_PROTOCOL,
        leader=NO_MEMBER,
        member_id=NO_MEMBER,
        members=[],
    )


def _refused_sync(_request: SyncGroupRequest, _context: RequestContext) -> SyncGroupResponse:
    return SyncGroupResponse(
        throttle_time_ms=0, error_code=ErrorCode.group_authorization_failed, assignment=b""
    )


def _refused_heartbeat(_request: HeartbeatRequest, _context: RequestContext) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.group_authorization_failed)


def _refused_leave(_request: LeaveGroupRequest, _context: RequestContext) -> LeaveGroupResponse:
    # One error for the request, none per member (LeaveGroupRequest.getErrorResponse).
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=ErrorCode.group_authorization_failed, members=[]
    )


join_group_rule = all_or_nothing(_reads_group, _refused_join)
sync_group_rule = all_or_nothing(_reads_group, _refused_sync)
heartbeat_rule = all_or_nothing(_reads_group, _refused_heartbeat)
leave_group_rule = all_or_nothing(_reads_group, _refused_leave)


async def find_coordinator_rule(
    request: FindCoordinatorRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[FindCoordinatorRequest, FindCoordinatorResponse],
) -> FindCoordinatorResponse:
    """A group's coordinator is found with DESCRIBE on the group, a transactional id's with
    DESCRIBE on the id; v4+ batches keys (KIP-699), each refused on its own."""
    if context.version < FIRST_BATCHED_FIND_COORDINATOR:
        refusal = _coordinator_refusal(request.key_type, request.key, permissions)
        if refusal is not None:
            return FindCoordinatorResponse(
                throttle_time_ms=0,
                coordinators=[],
                error_code=refusal,
                error_message=_COORDINATOR_REFUSALS[refusal],
                node_id=NO_NODE,
                host=NO_HOST,
                port=NO_PORT,
            )
        return await handle(request, context)
    response = await handle(request, context)
    response.coordinators = [
        _checked_coordinator(found, request.key_type, permissions)
        for found in response.coordinators
    ]
    return response


def _coordinator_refusal(key_type: int, key: str, permissions: Permissions) -> ErrorCode | None:
    if key_type == find_coordinator.GROUP_KEY_TYPE and not permissions.allows_group(
        Operation.DESCRIBE, key
    ):
        return ErrorCode.group_authorization_failed
    if key_type == find_coordinator.TRANSACTION_KEY_TYPE and not (
        permissions.allows_transactional_id(Operation.DESCRIBE, key)
    ):
        return ErrorCode.transactional_id_authorization_failed
    return None


def _checked_coordinator(
    found: Coordinator, key_type: int, permissions: Permissions
) -> Coordinator:
    """The handler's answer for one key of a batch, or its refusal; KafkaApis' v4+ answer
    sets no message for a refused key, so it is sent as the default, ""."""
    refusal = _coordinator_refusal(key_type, found.key, permissions)
    if refusal is None:
        return found
    return Coordinator(
        key=found.key,
        node_id=NO_NODE,
        host=NO_HOST,
        port=NO_PORT,
        error_code=refusal,
        error_message=find_coordinator.UNSET_MESSAGE,
    )


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


def _group_refusal(permissions: Permissions, request: _GroupRequest) -> ErrorCode | None:
    if _reads_group(permissions, request):
        return None
    return ErrorCode.group_authorization_failed


# READ on the group, or every partition is GROUP_AUTHORIZATION_FAILED; then READ on each
# topic, or its partitions are TOPIC_AUTHORIZATION_FAILED. With nothing left to commit, the
# group coordinator is not asked.
offset_commit_rule = item_by_item(
    Listing(OffsetCommitRequest, "topics", OffsetCommitResponse, "topics"),
    whole_first(_group_refusal, topics_need(Operation.READ)),
    partition_by_partition(OffsetCommitResponseTopic, OffsetCommitResponsePartition),
)
