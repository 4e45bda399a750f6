"""AlterConfigs (key 33): replace a topic's overrides with the given set (legacy API)."""

from __future__ import annotations

from kshim.broker.config.changes import change_resource
from kshim.broker.context import RequestContext
from kshim.broker.topic_resolver import ResolvedTopic
from kshim.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)


async def handle(request: AlterConfigsRequest, context: RequestContext) -> AlterConfigsResponse:
    broker = context.broker
    responses = []
    for resource in request.resources:

        async def replace(
            _: ResolvedTopic | None, resource: AlterConfigsResource = resource
        ) -> None:
            overrides = {config.name: config.value for config in resource.configs}
            await broker.topics.set_configs(
                resource.resource_name, overrides, request.validate_only
            )

        responses.append(
            await change_resource(broker.resolver, resource, replace, AlterConfigsResourceResponse)
        )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
