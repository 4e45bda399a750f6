"""AlterConfigs (key 33): replace a topic's overrides with the given set (legacy API)."""

from __future__ import annotations

from kshim.api.admin.config_changes import change_resource
from kshim.api.admin.services import TopicServices
from kshim.api.context import RequestContext
from kshim.broker.topic_resolver import ResolvedTopic
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)


async def handle(
    request: AlterConfigsRequest, context: RequestContext[TopicServices]
) -> AlterConfigsResponse:
    broker = context.broker
    responses = []
    for resource in request.resources:

        async def replace(
            _: ResolvedTopic | None, resource: AlterConfigsResource = resource
        ) -> None:
            overrides = {config.name: config.value for config in resource.configs}
            _refuse_nulls(overrides)
            await broker.topics.set_configs(
                resource.resource_name, overrides, request.validate_only
            )

        responses.append(
            await change_resource(broker.resolver, resource, replace, AlterConfigsResourceResponse)
        )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _refuse_nulls(overrides: dict[str, str | None]) -> None:
    """A null value makes the request malformed (INVALID_REQUEST, in the words of Kafka's
    ConfigAdminManager.preprocess), whether the topic exists or not."""
    for name, value in overrides.items():
        if value is None:
            raise TopicError(ErrorCode.invalid_request, f"Null value not supported for : {name}")
