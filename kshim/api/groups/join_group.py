"""JoinGroup (key 11): join or rejoin a classic group; the answer waits for the rebalance.

v0 has no rebalance timeout: the session timeout stands in for it (as Kafka's
JoinGroupRequest does); v4+ first answers a new member MEMBER_ID_REQUIRED with
its member id (KIP-394); v5+ carries group.instance.id (KIP-345); v7+ names the
protocol type and makes the protocol name nullable; v9 skip_assignment is
always false here (KIP-814 is only an optimisation for static leaders).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithGroups
from kshim.broker.groups.member import JoinRequest, JoinResult
from kshim.protocol.messages.join_group import (
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
)

FIRST_REBALANCE_TIMEOUT_VERSION = 1
FIRST_TWO_STEP_VERSION = 4  # KIP-394
FIRST_NULLABLE_PROTOCOL_VERSION = 7


async def handle(
    request: JoinGroupRequest, context: RequestContext[WithGroups]
) -> JoinGroupResponse:
    rebalance_timeout_ms = request.rebalance_timeout_ms
    if context.version < FIRST_REBALANCE_TIMEOUT_VERSION:
        rebalance_timeout_ms = request.session_timeout_ms
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        client_id=context.header.client_id or "",
        client_host=context.client_host,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((protocol.name, protocol.metadata) for protocol in request.protocols),
        require_known_member_id=context.version >= FIRST_TWO_STEP_VERSION,
    )
    result = await context.broker.groups.join(join)
    return _response(result, context.version)


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < FIRST_NULLABLE_PROTOCOL_VERSION:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=False,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                metadata=member.metadata,
            )
            for member in result.members
        ],
    )
