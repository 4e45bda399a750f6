"""The access rules of the config APIs: DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (ConfigHelper.handleDescribeConfigsRequest, ControllerApis'
authorizeAlterResource).

A topic's configs are described with DESCRIBE_CONFIGS on the topic and changed with
ALTER_CONFIGS; the broker's (and its loggers' and client metrics') with the same on the
cluster, a group's on the group. A refused resource is answered with the matching
authorisation error and its message. A resource type no rule covers is left to the
handler, which refuses it.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from kshim.api.access.permissions import (
    CLUSTER_REFUSED,
    GROUP_REFUSED,
    TOPIC_REFUSED,
    Permissions,
)
from kshim.api.access.refusals import merged
from kshim.api.access.rule import Handler
from kshim.api.admin.config_changes import ConfigResource, ResourceAnswer
from kshim.api.context import RequestContext
from kshim.broker.security.acls.model import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages import alter_configs as legacy
from kshim.protocol.messages import incremental_alter_configs as incremental
from kshim.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)

# Kafka's ConfigResource.Type codes.
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
CLUSTER_RESOURCES = (BROKER, BROKER_LOGGER, CLIENT_METRICS)
REFUSAL_MESSAGES = {
    ErrorCode.topic_authorization_failed: TOPIC_REFUSED,
    ErrorCode.cluster_authorization_failed: CLUSTER_REFUSED,
    ErrorCode.group_authorization_failed: GROUP_REFUSED,
}


ResourceT = TypeVar("ResourceT", bound=ConfigResource)
AnswerT = TypeVar("AnswerT")


def refusal(
    resource: ConfigResource, operation: Operation, permissions: Permissions
) -> ErrorCode | None:
    """The error refusing ``operation`` on the resource's configs, or None when allowed
    (or when the handler answers the resource type anyway)."""
    resource_type, name = resource.resource_type, resource.resource_name
    if resource_type == TOPIC and not permissions.allows_topic(operation, name):
        return ErrorCode.topic_authorization_failed
    if resource_type in CLUSTER_RESOURCES and not permissions.allows_cluster(operation):
        return ErrorCode.cluster_authorization_failed
    if resource_type == GROUP and not permissions.allows_group(operation, name):
        return ErrorCode.group_authorization_failed
    return None


async def describe_configs_rule(
    request: DescribeConfigsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[DescribeConfigsRequest, DescribeConfigsResponse],
) -> DescribeConfigsResponse:
    allowed, refused = _split(
        request.resources, Operation.DESCRIBE_CONFIGS, permissions, _refused_description
    )
    return await merged(
        handle,
        context,
        dataclasses.replace(request, resources=allowed) if allowed else None,
        lambda: DescribeConfigsResponse(throttle_time_ms=0, results=[]),
        lambda response: response.results,
        refused,
    )


def _refused_description(
    *, error_code: ErrorCode, error_message: str | None, resource_type: int, resource_name: str
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=error_code,
        error_message=error_message,
        resource_type=resource_type,
        resource_name=resource_name,
        configs=[],
    )


async def alter_configs_rule(
    request: legacy.AlterConfigsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[legacy.AlterConfigsRequest, legacy.AlterConfigsResponse],
) -> legacy.AlterConfigsResponse:
    allowed, refused = _split(
        request.resources, Operation.ALTER_CONFIGS, permissions, legacy.AlterConfigsResourceResponse
    )
    return await merged(
        handle,
        context,
        dataclasses.replace(request, resources=allowed) if allowed else None,
        lambda: legacy.AlterConfigsResponse(throttle_time_ms=0, responses=[]),
        lambda response: response.responses,
        refused,
    )


async def incremental_alter_configs_rule(
    request: incremental.IncrementalAlterConfigsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[
        incremental.IncrementalAlterConfigsRequest, incremental.IncrementalAlterConfigsResponse
    ],
) -> incremental.IncrementalAlterConfigsResponse:
    allowed, refused = _split(
        request.resources,
        Operation.ALTER_CONFIGS,
        permissions,
        incremental.AlterConfigsResourceResponse,
    )
    return await merged(
        handle,
        context,
        dataclasses.replace(request, resources=allowed) if allowed else None,
        lambda: incremental.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[]),
        lambda response: response.responses,
        refused,
    )


def _split(
    resources: list[ResourceT],
    operation: Operation,
    permissions: Permissions,
    answer: ResourceAnswer[AnswerT],
) -> tuple[list[ResourceT], list[AnswerT]]:
    """(the resources whose configs the client may ``operation``, the others' answers)."""
    allowed: list[ResourceT] = []
    refused: list[AnswerT] = []
    for resource in resources:
        error = refusal(resource, operation, permissions)
        if error is None:
            allowed.append(resource)
        else:
            refused.append(
                answer(
                    error_code=error,
                    error_message=REFUSAL_MESSAGES[error],
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
    return allowed, refused
