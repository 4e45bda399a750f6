"""Heartbeat (key 12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin.

v3+ carries group.instance.id (KIP-345); older versions leave it null.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithGroups
from kshim.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse


async def handle(
    request: HeartbeatRequest, context: RequestContext[WithGroups]
) -> HeartbeatResponse:
    error = context.broker.groups.heartbeat(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
