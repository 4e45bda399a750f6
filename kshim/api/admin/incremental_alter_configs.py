"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND, SUBTRACT on a topic's overrides.

Requests Kafka refuses before changing anything are refused the same way, each with
INVALID_REQUEST (Kafka's ConfigAdminManager.preprocess): a resource named twice (every
one of its answers), a config named twice in one resource, a SET without a value.
"""

from __future__ import annotations

import collections

from kshim.api.admin.config_changes import change_resource
from kshim.api.admin.services import TopicServices
from kshim.api.context import RequestContext
from kshim.broker.config.keys import LIST, TOPIC_CONFIGS
from kshim.broker.topic_resolver import ResolvedTopic
from kshim.broker.topics import (
    INVALID_CONFIG,
    TopicError,
    no_topic_to_configure,
    validate_topic_configs,
)
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_OPERATIONS = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


async def handle(
    request: IncrementalAlterConfigsRequest, context: RequestContext[TopicServices]
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
                # Kafka's controller checks the new values before it looks the topic up.
                validate_topic_configs(_apply({}, {}, resource.configs))
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
    """The overrides after ``changes``, in Kafka's words where a change cannot be made
    (ConfigurationControlManager.incrementalAlterConfigResource)."""
    for change in changes:
        spec = TOPIC_CONFIGS.get(change.name)
        if spec is None:
            raise TopicError(INVALID_CONFIG, f"Unknown topic config name: {change.name}")
        operation = change.config_operation
        if operation == SET:
            overrides[change.name] = change.value
        elif operation == DELETE:
            overrides.pop(change.name, None)
        elif operation in LIST_OPERATIONS and spec.config_type != LIST:
            raise TopicError(
                INVALID_CONFIG,
                f"Can't {LIST_OPERATIONS[operation]} to key {change.name} because its type "
                "is not LIST.",
            )
        elif operation in LIST_OPERATIONS:
            current = effective.get(change.name, "")
            items = [item for item in current.split(",") if item]
            # Kafka splits the value with Java's String.split: an empty value is one empty
            # item, which the list's validator then refuses, as Kafka's does.
            given = _java_split(change.value or "")
            if operation == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            overrides[change.name] = ",".join(items)
        else:
            raise TopicError(INVALID_CONFIG, f"operation {operation} invalid for {change.name}")
    return overrides


def _java_split(value: str) -> list[str]:
    """``value.split(",")`` in Java: no comma gives the value itself, else the pieces
    without the empty ones at the end."""
    pieces = value.split(",")
    if len(pieces) > 1:
        while pieces and not pieces[-1]:
            pieces.pop()
    return pieces
