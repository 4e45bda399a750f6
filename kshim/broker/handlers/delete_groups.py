"""DeleteGroups (key 42): delete empty groups and their committed offsets.

A group with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.groups.admin import delete_group


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    results = [
        {"group_id": group_id, "error_code": await delete_group(context.broker.groups, group_id)}
        for group_id in request.groups_names
    ]
    return {"throttle_time": 0, "results": results}
