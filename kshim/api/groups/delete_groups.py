"""DeleteGroups (key 42): delete empty groups and their committed offsets.

A group with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND
(``groups/admin.py``).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithGroups
from kshim.broker.groups.admin import delete_group
from kshim.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)


async def handle(
    request: DeleteGroupsRequest, context: RequestContext[WithGroups]
) -> DeleteGroupsResponse:
    results = [
        DeletableGroupResult(
            group_id=group_id, error_code=await delete_group(context.broker.groups, group_id)
        )
        for group_id in request.groups_names
    ]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
