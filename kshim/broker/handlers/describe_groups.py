"""DescribeGroups (key 15): state, protocol and members of each group.

As in Kafka, member metadata and assignments are only shown for a Stable
group, and an unknown group is reported Dead with no error (GROUP_ID_NOT_FOUND
is v6+, not advertised). authorized_operations is INT32_MIN ("not computed"):
-1 would make kafka-python's admin fail (research notes §7.3).
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.groups.admin import GroupDescription, describe_group
from kshim.broker.groups.coordinator import valid_group_id
from kshim.broker.groups.group_states import GroupState
from kshim.protocol.errors import ErrorCode

AUTHORIZED_OPERATIONS_NOT_COMPUTED = -(2**31)


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    coordinator = context.broker.groups
    groups = []
    for group_id in request.groups:
        if not valid_group_id(group_id):
            groups.append(_invalid(group_id))
            continue
        groups.append(_described(describe_group(coordinator, group_id)))
    return {"throttle_time": 0, "groups": groups}


def _described(description: GroupDescription) -> dict[str, Any]:
    stable = description.state is GroupState.STABLE
    return {
        "error_code": ErrorCode.none,
        "group_id": description.group_id,
        "group_state": description.state.value,
        "protocol_type": description.protocol_type,
        "protocol_data": description.protocol_name,
        "members": [
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "member_metadata": member.metadata_for(description.protocol_name)
                if stable
                else b"",
                "member_assignment": member.assignment if stable else b"",
            }
            for member in description.members
        ],
        "authorized_operations": AUTHORIZED_OPERATIONS_NOT_COMPUTED,
    }


def _invalid(group_id: str) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.invalid_group_id,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": AUTHORIZED_OPERATIONS_NOT_COMPUTED,
    }
