"""FindCoordinator (key 10): this single broker coordinates every group and transaction.

v0-3 ask for one key; v4+ for a batch of keys of one type (KIP-699), each answered on its
own in ``coordinators``. A key found has the error message Kafka 3.9's KafkaApis gives it:
v1-3 ``Errors.NONE.message()``, which is "NONE"; v4+ none set, which the generated message
class sends as its default, "".
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.groups.services import Listeners
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
KNOWN_KEY_TYPES = (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE)
SHARE_KEY_TYPE = 2  # a share group's coordinator (KIP-932): Kafka 3.9 has none either
FIRST_BATCHED_VERSION, FIRST_SHARE_VERSION = 4, 6
FOUND_MESSAGE_V3 = "NONE"
UNSET_MESSAGE = ""  # v4+: a message KafkaApis leaves unset, its generated class's default
# Errors.INVALID_REQUEST's own message, which Kafka sends when the whole request fails.
MALFORMED = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)


async def handle(
    request: FindCoordinatorRequest, context: RequestContext[Listeners]
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


def _coordinator(key: str, key_type: int, context: RequestContext[Listeners]) -> Coordinator:
    """This broker for a known key type, else a refusal with no node."""
    if key_type not in KNOWN_KEY_TYPES:
        error_code, message = _refusal(key_type, context.version)
        return Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=error_code, error_message=message
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


def _refusal(key_type: int, version: int) -> tuple[ErrorCode, str]:
    """Kafka 3.9's answer for a key type without a coordinator here (KafkaApis'
    getCoordinator): a share group's key, from v4, is refused on its own with no message,
    INVALID_REQUEST before v6 and COORDINATOR_NOT_AVAILABLE from v6; any other type fails
    the whole request with INVALID_REQUEST and that error's own message."""
    if key_type == SHARE_KEY_TYPE and version >= FIRST_BATCHED_VERSION:
        if version >= FIRST_SHARE_VERSION:
            return ErrorCode.coordinator_not_available, UNSET_MESSAGE
        return ErrorCode.invalid_request, UNSET_MESSAGE
    return ErrorCode.invalid_request, MALFORMED
