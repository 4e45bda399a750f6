"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND, SUBTRACT on a topic's overrides."""

from __future__ import annotations

from typing import Any

from kshim.broker.config.changes import change_resource
from kshim.broker.config.keys import LIST, TOPIC_CONFIGS
from kshim.broker.context import RequestContext
from kshim.broker.topics import INVALID_CONFIG, UNKNOWN_TOPIC, TopicError

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    responses = []
    for resource in request.resources:

        async def apply(resource: Any = resource) -> None:
            topic = broker.topic(resource.resource_name)
            if topic is None:
                raise TopicError(UNKNOWN_TOPIC, f"unknown topic {resource.resource_name!r}")
            overrides = _apply(dict(topic.record.configs), topic.configs, resource.configs)
            await broker.topics.set_configs(
                resource.resource_name, overrides, request.validate_only
            )

        responses.append(await change_resource(broker, resource, apply))
    return {"throttle_time": 0, "responses": responses}


def _apply(overrides: dict[str, str], effective: dict[str, str], changes: Any) -> dict[str, str]:
    for change in changes:
        spec = TOPIC_CONFIGS.get(change.name)
        if spec is None:
            raise TopicError(INVALID_CONFIG, f"unknown topic config {change.name}")
        if change.config_operation == SET:
            overrides[change.name] = change.value
        elif change.config_operation == DELETE:
            overrides.pop(change.name, None)
        elif change.config_operation in (APPEND, SUBTRACT) and spec.config_type == LIST:
            items = [item for item in effective[change.name].split(",") if item]
            given = [item for item in (change.value or "").split(",") if item]
            if change.config_operation == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            overrides[change.name] = ",".join(items)
        else:
            raise TopicError(
                INVALID_CONFIG, f"operation {change.config_operation} invalid for {change.name}"
            )
    return overrides
