"""Heartbeat (key 12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    error = context.broker.groups.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),  # v3+
    )
    return {"throttle_time": 0, "error_code": error}
