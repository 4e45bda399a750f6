"""DeleteTopics (key 20): by name (v0-5) or by name or topic id (v6)."""

from __future__ import annotations

import uuid
from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.full_view.naming import source_of
from kshim.broker.groups.admin import drop_topic_offsets
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode

NO_TOPIC_ID = uuid.UUID(int=0)


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    if hasattr(request, "topic_names"):
        targets = [(name, None) for name in request.topic_names]
    else:
        targets = [(topic.name, topic.topic_id) for topic in request.topics]
    return {
        "throttle_time": 0,
        "responses": [await _delete(broker, name, topic_id) for name, topic_id in targets],
    }


def _name_of(broker: Broker, topic_id: uuid.UUID) -> str | None:
    for topic in broker.topics.topics.values():
        if topic.record.topic_id == topic_id.bytes:
            return topic.record.name
    return None


async def _delete(broker: Broker, name: str | None, topic_id: uuid.UUID | None) -> dict[str, Any]:
    if name is None and topic_id is not None and topic_id != NO_TOPIC_ID:
        name = _name_of(broker, topic_id)
        if name is None:
            return {"name": None, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_id}
    answer: dict[str, Any] = {"name": name, "topic_id": topic_id or NO_TOPIC_ID}
    topic = broker.topic(name or "")
    if topic is None and source_of(broker.topics.topics, name or "") is not None:
        message = f"{name} is a full-data view; delete its topic instead"
        answer.update(error_code=ErrorCode.policy_violation, error_message=message)
        return answer
    if topic is None:
        answer["error_code"] = ErrorCode.unknown_topic_or_partition
        return answer
    answer["topic_id"] = uuid.UUID(bytes=topic.record.topic_id)
    try:
        await broker.topics.delete(topic.record.name)
        broker.transactions.forget_topic(topic.record.name)
        await drop_topic_offsets(broker.groups, topic.record.name)
        await broker.full_view.forget_topic(topic.record.name)
    except TopicError as error:
        answer.update(error_code=ErrorCode(error.code), error_message=str(error))
        return answer
    answer["error_code"] = ErrorCode.none
    return answer
