"""LeaveGroup (key 13): members leave, and the group rebalances without them.

v0-2 name one member, whose error is the response's error; v3+ a batch of
(member id, group.instance.id), where a static member may leave by instance id
alone (KIP-345), each with its own error.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithGroups
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
)

FIRST_BATCHED_VERSION = 3  # KIP-345


async def handle(
    request: LeaveGroupRequest, context: RequestContext[WithGroups]
) -> LeaveGroupResponse:
    coordinator = context.broker.groups
    if context.version < FIRST_BATCHED_VERSION:
        error = coordinator.leave(request.group_id, request.member_id, None)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[])
    members = [
        MemberResponse(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            error_code=coordinator.leave(
                request.group_id, member.member_id, member.group_instance_id
            ),
        )
        for member in request.members
    ]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.none, members=members)
