"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND, SUBTRACT on a topic's overrides.

Requests Kafka refuses before changing anything are refused the same way, each with
INVALID_REQUEST (Kafka's ConfigAdminManager.preprocess): a resource named twice (every
one of its answers), a config named twice in one resource, a SET without a value.
"""

from __future__ import annotations

import collections

from kshim.broker.config.changes import change_resource
from kshim.broker.config.keys import LIST, TOPIC_CONFIGS
from kshim.broker.context import RequestContext
from kshim.broker.topic_resolver import ResolvedTopic
from kshim.broker.topics import INVALID_CONFIG, TopicError, no_topic_to_configure
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def handle(
    request: IncrementalAlterConfigsRequest, context: RequestContext
) -> IncrementalAlterConfigsResponse:
    broker = context.broker
    responses = []
    named = collections.Counter(
        (resource.resource_type, resource.resource_name) for resource in request.resources
    )
    for resource in request.resources:
        twice = named[(resource.resource_type, resource.resource_name)] > 1

        async def apply(
            topic: ResolvedTopic | None,
            resource: AlterConfigsResource = resource,
            twice: bool = twice,
        ) -> None:
            _refuse_malformed(resource, twice)
            if topic is None:
                raise no_topic_to_configure(resource.resource_name)
            configs = topic.configs()
            overrides = _apply(dict(configs.overrides()), configs.values, resource.configs)
            await broker.topics.set_configs(
                resource.resource_name, overrides, request.validate_only
            )

        responses.append(
            await change_resource(broker.resolver, resource, apply, AlterConfigsResourceResponse)
        )
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _refuse_malformed(resource: AlterConfigsResource, named_twice: bool) -> None:
    if named_twice:
        raise TopicError(ErrorCode.invalid_request, "Each resource must appear at most once.")
    names = [change.name for change in resource.configs]
    if len(names) != len(set(names)):
        raise TopicError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for change in resource.configs:
        if change.config_operation == SET and change.value is None:
            raise TopicError(
                ErrorCode.invalid_request, f"Null value not supported for : {change.name}"
            )


def _apply(
    overrides: dict[str, str | None], effective: dict[str, str], changes: list[AlterableConfig]
) -> dict[str, str | None]:
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
