"""SyncGroup (key 14): the leader hands in the assignment; every member gets its own.

A member that arrives before the leader waits for it (or for the next
rebalance, answered REBALANCE_IN_PROGRESS). v3+ carries group.instance.id
(KIP-345); v5+ names the protocol type and name in both directions (KIP-559),
null in older versions.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithGroups
from kshim.broker.groups.member import SyncRequest
from kshim.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse


async def handle(
    request: SyncGroupRequest, context: RequestContext[WithGroups]
) -> SyncGroupResponse:
    sync = SyncRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments=tuple(
            (assignment.member_id, assignment.assignment) for assignment in request.assignments
        ),
    )
    result = await context.broker.groups.sync(sync)
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
