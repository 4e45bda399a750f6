"""FindCoordinator (key 10): this single broker coordinates every group and transaction.

v0-3 ask for one key; v4+ for a batch of keys of one type (KIP-699), each answered on its
own in ``coordinators``. A key found has the error message Kafka 3.9's KafkaApis gives it:
v1-3 ``Errors.NONE.message()``, which is "NONE"; v4+ none set, which the generated message
class sends as its default, "".
"""

from __future__ import annotations

from kshim.broker.context import RequestContext
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
KNOWN_KEY_TYPES = (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE)
FOUND_MESSAGE_V3 = "NONE"
UNSET_MESSAGE = ""  # v4+: a message KafkaApis leaves unset, its generated class's default


async def handle(
    request: FindCoordinatorRequest, context: RequestContext
) -> FindCoordinatorResponse:
    found = _coordinator(request.key, request.key_type, context)
    found_message = FOUND_MESSAGE_V3 if found.error_code == ErrorCode.none else found.error_message
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=found.error_code,
        error_message=found_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
        coordinators=[
            _coordinator(key, request.key_type, context) for key in request.coordinator_keys
        ],
    )


def _coordinator(key: str, key_type: int, context: RequestContext) -> Coordinator:
    """This broker for a known key type, else INVALID_REQUEST with no node."""
    if key_type not in KNOWN_KEY_TYPES:
        return Coordinator(
            key=key,
            node_id=-1,
            host="",
            port=-1,
            error_code=ErrorCode.invalid_request,
            error_message=f"unknown key type {key_type}",
        )
    host, port = context.broker.endpoints.address(context.session.listener)
    return Coordinator(
        key=key,
        node_id=context.broker.config.node_id,
        host=host,
        port=port,
        error_code=ErrorCode.none,
        error_message=UNSET_MESSAGE,
    )
