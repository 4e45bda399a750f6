"""CreatePartitions (key 37)."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    results = []
    for topic in request.topics:
        answer: dict[str, Any] = {
            "name": topic.name,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        try:
            await context.broker.topics.add_partitions(
                topic.name, topic.count, request.validate_only
            )
        except TopicError as error:
            answer.update(error_code=ErrorCode(error.code), error_message=str(error))
        results.append(answer)
    return {"throttle_time": 0, "results": results}
