"""DescribeConfigs (key 32): topic and broker configs.

A full-data view is described as the topic resolver says (``ResolvedTopic.configs``):
its topic's settings, compacted, every one read-only. Kafka's ConfigHelper sets no error
message on a topic described or unknown, so theirs is sent as the default, "".
"""

from __future__ import annotations

from kshim.api.admin.services import ConfiguredTopics
from kshim.api.context import RequestContext
from kshim.broker.config.describe import describe_broker_configs, describe_topic_configs
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
UNSET_MESSAGE = ""


async def handle(
    request: DescribeConfigsRequest, context: RequestContext[ConfiguredTopics]
) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        throttle_time_ms=0,
        results=[
            _describe(resource, context.broker, request.include_synonyms)
            for resource in request.resources
        ],
    )


def _describe(
    resource: DescribeConfigsResource, broker: ConfiguredTopics, synonyms: bool
) -> DescribeConfigsResult:
    # A null or empty key list asks for every config.
    only = set(resource.configuration_keys) if resource.configuration_keys else None
    name = resource.resource_name
    if resource.resource_type == TOPIC_RESOURCE:
        resolved = broker.resolver.resolve(name)
        if resolved is None:
            return _error(resource, ErrorCode.unknown_topic_or_partition, UNSET_MESSAGE)
        static = broker.config.static_settings()
        described = describe_topic_configs(resolved.configs(), only, synonyms, static)
        return _described(resource, described)
    if resource.resource_type == BROKER_RESOURCE and name in ("", str(broker.config.node_id)):
        return _described(resource, describe_broker_configs(broker.config.values, only))
    return _error(resource, ErrorCode.invalid_request, "unsupported resource")


def _described(
    resource: DescribeConfigsResource, configs: list[DescribeConfigsResourceResult]
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=ErrorCode.none,
        error_message=UNSET_MESSAGE,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


def _error(
    resource: DescribeConfigsResource, error: ErrorCode, message: str
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=error,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=[],
    )
