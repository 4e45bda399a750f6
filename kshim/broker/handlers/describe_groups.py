"""DescribeGroups (key 15): state, protocol and members of each group.

As in Kafka, member metadata and assignments are only shown for a Stable group,
and an unknown group is reported Dead with no error (GROUP_ID_NOT_FOUND is v6+,
not advertised); ``groups/admin.py`` decides what is shown. authorized_operations
is INT32_MIN, Kafka's "not computed" (KIP-430): kshim computes no ACLs, and
kafka-python's admin reads -1 as a set of operations and fails on it.
"""

from __future__ import annotations

from kshim.broker.context import RequestContext
from kshim.broker.groups.admin import GroupDescription, describe_group
from kshim.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)

AUTHORIZED_OPERATIONS_NOT_COMPUTED = -(2**31)


async def handle(request: DescribeGroupsRequest, context: RequestContext) -> DescribeGroupsResponse:
    coordinator = context.broker.groups
    return DescribeGroupsResponse(
        throttle_time_ms=0,
        groups=[_described(describe_group(coordinator, group_id)) for group_id in request.groups],
    )


def _described(description: GroupDescription) -> DescribedGroup:
    return DescribedGroup(
        error_code=description.error,
        group_id=description.group_id,
        group_state=description.state_name,
        protocol_type=description.protocol_type,
        protocol_data=description.protocol_name,
        members=[
            DescribedGroupMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.metadata,
                member_assignment=member.assignment,
            )
            for member in description.members
        ],
        authorized_operations=AUTHORIZED_OPERATIONS_NOT_COMPUTED,
    )
