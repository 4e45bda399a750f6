"""ListGroups (key 16): every group, with its state (v4+, KIP-518) and type (v5+, KIP-848).

The filters (empty in versions without them) are applied by ``groups/admin.py``;
all of kshim's groups are of the classic type.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithGroups
from kshim.broker.groups.admin import list_groups
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.list_groups import (
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)


async def handle(
    request: ListGroupsRequest, context: RequestContext[WithGroups]
) -> ListGroupsResponse:
    overviews = list_groups(context.broker.groups, request.states_filter, request.types_filter)
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.none,
        groups=[
            ListedGroup(
                group_id=overview.group_id,
                protocol_type=overview.protocol_type,
                group_state=overview.state.value,
                group_type=overview.group_type,
            )
            for overview in overviews
        ],
    )
