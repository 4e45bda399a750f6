"""SyncGroup (key 14): the leader hands in the assignment; every member gets its own.

A member that arrives before the leader waits for it (or for the next
rebalance, answered REBALANCE_IN_PROGRESS). v5+ names the protocol type and
name in both directions (KIP-559).
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.groups.member import SyncRequest


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    sync = SyncRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple(
            (assignment.member_id, bytes(assignment.assignment))
            for assignment in request.assignments
        ),
    )
    result = await context.broker.groups.sync(sync)
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
