"""DescribeGroups (key 15): state, protocol and members of each group.

As in Kafka, member metadata and assignments are only shown for a Stable group,
and an unknown group is reported Dead with no error (GROUP_ID_NOT_FOUND is v6+,
not advertised); ``groups/admin.py`` decides what is shown. authorized_operations
(KIP-430) is INT32_MIN, Kafka's "not asked", unless asked for (v3+); then each group
described without an error (an unknown one is Dead, with no error) carries, without an
authoriser, every operation a group supports, as in Kafka's handleDescribeGroupsRequest
(kafka-python's admin reads -1 as a set of operations and fails on it). Where ACLs apply,
the access rule (access.py) puts in the principal's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kshim.api.context import RequestContext
from kshim.api.services import WithGroups
from kshim.broker.groups.admin import GroupDescription, describe_group
from kshim.protocol.acls import ResourceType, all_supported
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kshim.protocol.metadata_response import UNKNOWN_AUTHORIZED_OPERATIONS

FIRST_WITH_AUTHORIZED_OPERATIONS = 3


async def handle(
    request: DescribeGroupsRequest, context: RequestContext[WithGroups]
) -> DescribeGroupsResponse:
    coordinator = context.broker.groups
    described = [_described(describe_group(coordinator, group_id)) for group_id in request.groups]
    if asks_operations(request, context.version):
        described = with_operations(described, _every_group_operation)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def _every_group_operation(group_id: str) -> int:
    return all_supported(ResourceType.GROUP)


def asks_operations(request: DescribeGroupsRequest, version: int) -> bool:
    """Whether the request asks for each group's authorized operations (KIP-430, v3+)."""
    return version >= FIRST_WITH_AUTHORIZED_OPERATIONS and request.include_authorized_operations


def with_operations(
    groups: list[DescribedGroup], operations: Callable[[str], int]
) -> list[DescribedGroup]:
    """Each group described without an error with its operations, by group id (Kafka
    leaves them "not asked" on an error answer)."""
    return [
        dataclasses.replace(group, authorized_operations=operations(group.group_id))
        if group.error_code == ErrorCode.none
        else group
        for group in groups
    ]


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
        authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )
