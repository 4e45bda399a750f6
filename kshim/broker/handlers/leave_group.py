"""LeaveGroup (key 13): members leave, and the group rebalances without them.

v0-2 name one member; v3+ a batch of (member id, group.instance.id), where a
static member may leave by instance id alone (KIP-345). For v0-2 the member's
error is the response's error.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    coordinator = context.broker.groups
    members = getattr(request, "members", None)
    if members is None:  # v0-2
        error = coordinator.leave(request.group_id, request.member_id, None)
        return {"throttle_time": 0, "error_code": error, "members": []}
    results = [
        {
            "member_id": member.member_id,
            "group_instance_id": member.group_instance_id,
            "error_code": coordinator.leave(
                request.group_id, member.member_id, member.group_instance_id
            ),
        }
        for member in members
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "members": results}
