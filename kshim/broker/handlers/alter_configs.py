"""AlterConfigs (key 33): replace a topic's overrides with the given set (legacy API)."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.full_view.naming import refuse_view_change
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode

TOPIC_RESOURCE = 2


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    responses = []
    for resource in request.resources:
        answer: dict[str, Any] = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        if resource.resource_type != TOPIC_RESOURCE:
            answer.update(
                error_code=ErrorCode.invalid_request, error_message="broker configs are static"
            )
        else:
            overrides = {config.name: config.value for config in resource.configs}
            try:
                refuse_view_change(context.broker.topics.topics, resource.resource_name)
                await context.broker.topics.set_configs(
                    resource.resource_name, overrides, request.validate_only
                )
            except TopicError as error:
                answer.update(error_code=ErrorCode(error.code), error_message=str(error))
        responses.append(answer)
    return {"throttle_time": 0, "responses": responses}
