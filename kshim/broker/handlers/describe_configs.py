"""DescribeConfigs (key 32): topic and broker configs."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.describe import describe_broker_configs, describe_topic_configs
from kshim.protocol.errors import ErrorCode

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    results = [_describe(resource, context) for resource in request.resources]
    if not getattr(request, "include_synonyms", False):  # synonyms only when asked (v1+)
        for result in results:
            for config in result["configs"]:
                config["synonyms"] = []
    return {"throttle_time": 0, "results": results}


def _describe(resource: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    only = None if resource.configuration_keys is None else set(resource.configuration_keys)
    if not only:
        only = None
    answer: dict[str, Any] = {
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "error_code": ErrorCode.none,
        "error_message": None,
        "configs": [],
    }
    if resource.resource_type == TOPIC_RESOURCE:
        topic = broker.topic(resource.resource_name)
        if topic is None:
            answer.update(
                error_code=ErrorCode.unknown_topic_or_partition, error_message="unknown topic"
            )
        else:
            answer["configs"] = describe_topic_configs(
                topic.configs, topic.record.configs.keys(), only
            )
    elif resource.resource_type == BROKER_RESOURCE and resource.resource_name in (
        "",
        str(broker.config.node_id),
    ):
        answer["configs"] = describe_broker_configs(broker.config.values, only)
    else:
        answer.update(error_code=ErrorCode.invalid_request, error_message="unsupported resource")
    return answer
