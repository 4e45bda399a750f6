"""CreateTopics (key 19)."""

from __future__ import annotations

import uuid
from typing import Any

from kshim.broker.config.describe import describe_topic_configs
from kshim.broker.context import RequestContext
from kshim.broker.full_view.naming import VIEW_SUFFIX, reserved_for_view
from kshim.broker.topics import INVALID_REPLICATION_FACTOR, INVALID_TOPIC, TopicError
from kshim.protocol.errors import ErrorCode

DEFAULT = -1
# What CreateTopics v5+ says of each config: DescribeConfigs' answer without its
# synonyms, type and documentation.
CREATED_CONFIG_FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive")


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            await _create(topic, request.validate_only, context) for topic in request.topics
        ],
    }


async def _create(topic: Any, validate_only: bool, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    partitions = topic.num_partitions
    if topic.assignments:
        partitions = len(topic.assignments)
    elif partitions == DEFAULT:
        partitions = broker.config.get_int("num.partitions")
    answer: dict[str, Any] = {"name": topic.name, "topic_id": uuid.UUID(int=0), "configs": None}
    try:
        if reserved_for_view(topic.name):
            raise TopicError(
                INVALID_TOPIC,
                f"names ending in {VIEW_SUFFIX!r} are reserved for full-data views",
            )
        if topic.replication_factor not in (DEFAULT, 1):
            raise TopicError(INVALID_REPLICATION_FACTOR, "a single broker keeps one replica")
        overrides = {config.name: config.value for config in topic.configs}
        created = await broker.topics.create(topic.name, partitions, overrides, validate_only)
    except TopicError as error:
        answer.update(error_code=ErrorCode(error.code), error_message=str(error))
        return answer
    configs = broker.topics.effective_configs({k: v for k, v in overrides.items() if v is not None})
    answer.update(
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=partitions,
        replication_factor=1,
        configs=[
            {key: config[key] for key in CREATED_CONFIG_FIELDS}
            for config in describe_topic_configs(configs, overrides.keys(), None)
        ],
    )
    if created is not None:
        answer["topic_id"] = uuid.UUID(bytes=created.record.topic_id)
    return answer
