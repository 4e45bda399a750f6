"""ListGroups (key 16): every group, with its state (v4+, KIP-518) and type (v5+, KIP-848).

Filters compare case-insensitively; all of kshim's groups are of the classic type.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.groups.admin import CLASSIC_GROUP_TYPE, list_groups
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    states = {state.lower() for state in getattr(request, "states_filter", ())}
    types = {group_type.lower() for group_type in getattr(request, "types_filter", ())}
    if types and CLASSIC_GROUP_TYPE not in types:
        return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": []}
    groups = [
        {
            "group_id": overview.group_id,
            "protocol_type": overview.protocol_type,
            "group_state": overview.state.value,
            "group_type": CLASSIC_GROUP_TYPE,
        }
        for overview in list_groups(context.broker.groups)
        if not states or overview.state.value.lower() in states
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}
