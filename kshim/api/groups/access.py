"""The access rules of the consumer group APIs and of FindCoordinator (KafkaApis'
group handlers: handleJoinGroupRequest, handleOffsetCommitRequest, handleOffsetFetchRequest
and the rest).

A member needs READ on its group to join, sync, heartbeat, leave and commit; DESCRIBE to
find its coordinator or fetch its offsets; an admin DESCRIBE to describe a group or see
it listed, DELETE to delete it or its offsets. Offsets of a topic are committed with READ
on the topic, fetched with DESCRIBE, and deleted with READ.
"""

from __future__ import annotations

from typing import Protocol

from kshim.api.access.permissions import GROUP_REFUSED, TRANSACTIONAL_ID_REFUSED, Permissions
from kshim.api.access.refusals import (
    Listing,
    item_by_item,
    partition_by_partition,
    topics_need,
    whole_first,
)
from kshim.api.access.rule import Handler, all_or_nothing
from kshim.api.context import RequestContext
from kshim.api.groups import find_coordinator, join_group
from kshim.protocol.acls import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kshim.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kshim.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kshim.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kshim.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kshim.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

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
