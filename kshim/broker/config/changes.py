"""What AlterConfigs and IncrementalAlterConfigs share: one resource's checks and answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.full_view.naming import refuse_view_change
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode

TOPIC_RESOURCE = 2


async def change_resource(
    broker: Broker, resource: Any, change: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    """Runs ``change`` for a topic resource (broker configs are static; views are
    read-only) and returns the resource's answer, a TopicError becoming its error code."""
    answer: dict[str, Any] = {
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    try:
        if resource.resource_type != TOPIC_RESOURCE:
            raise TopicError(ErrorCode.invalid_request, "broker configs are static")
        refuse_view_change(broker.topics.topics, resource.resource_name)
        await change()
    except TopicError as error:
        answer.update(error_code=ErrorCode(error.code), error_message=str(error))
    return answer
