"""DescribeConfigs (key 32): topic and broker configs."""

from __future__ import annotations

from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.config.describe import describe_broker_configs, describe_topic_configs
from kshim.broker.context import RequestContext
from kshim.broker.full_view.naming import VIEW_CONFIG, source_of
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
        answer.update(_describe_topic(broker, resource.resource_name, only))
    elif resource.resource_type == BROKER_RESOURCE and resource.resource_name in (
        "",
        str(broker.config.node_id),
    ):
        answer["configs"] = describe_broker_configs(broker.config.values, only)
    else:
        answer.update(error_code=ErrorCode.invalid_request, error_message="unsupported resource")
    return answer


def _describe_topic(broker: Broker, name: str, only: set[str] | None) -> dict[str, Any]:
    topic = broker.topic(name)
    if topic is not None:
        return {"configs": describe_topic_configs(topic.configs, topic.record.configs, only)}
    source = source_of(broker.topics.topics, name)
    if source is None:
        return {
            "error_code": ErrorCode.unknown_topic_or_partition,
            "error_message": "unknown topic",
        }
    # A view is its topic's data compacted: its topic's settings, every one read-only
    # (AlterConfigs on a view is refused), and no view of its own.
    configs = {**source.configs, "cleanup.policy": "compact", VIEW_CONFIG: "false"}
    overridden = {*source.record.configs, "cleanup.policy", VIEW_CONFIG}
    return {"configs": describe_topic_configs(configs, overridden, only, read_only=True)}
