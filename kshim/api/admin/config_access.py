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

from collections.abc import Callable, Sequence
from typing import TypeVar

from kshim.api.access.permissions import (
    CLUSTER_REFUSED,
    GROUP_REFUSED,
    TOPIC_REFUSED,
    Permissions,
)
from kshim.api.access.refusals import Listing, Refusals, item_by_item
from kshim.api.admin.config_changes import ConfigResource, ResourceAnswer
from kshim.protocol.acls import Operation
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


def _configs_need(operation: Operation) -> Refusals[object, ConfigResource]:
    """Each resource's ``refusal`` of ``operation`` on its configs."""

    def refusals(
        permissions: Permissions, _request: object, resources: Sequence[ConfigResource]
    ) -> list[ErrorCode | None]:
        return [refusal(resource, operation, permissions) for resource in resources]

    return refusals


def _refused(answer: ResourceAnswer[AnswerT]) -> Callable[[ConfigResource, ErrorCode], AnswerT]:
    """A refused resource's ``answer``, with the error's message."""

    def refused(resource: ConfigResource, error: ErrorCode) -> AnswerT:
        return answer(
            error_code=error,
            error_message=REFUSAL_MESSAGES[error],
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )

    return refused


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


# Configs are described with DESCRIBE_CONFIGS on their resource, changed with ALTER_CONFIGS.
describe_configs_rule = item_by_item(
    Listing(DescribeConfigsRequest, "resources", DescribeConfigsResponse, "results"),
    _configs_need(Operation.DESCRIBE_CONFIGS),
    _refused(_refused_description),
)
alter_configs_rule = item_by_item(
    Listing(legacy.AlterConfigsRequest, "resources", legacy.AlterConfigsResponse, "responses"),
    _configs_need(Operation.ALTER_CONFIGS),
    _refused(legacy.AlterConfigsResourceResponse),
)
incremental_alter_configs_rule = item_by_item(
    Listing(
        incremental.IncrementalAlterConfigsRequest,
        "resources",
        incremental.IncrementalAlterConfigsResponse,
        "responses",
    ),
    _configs_need(Operation.ALTER_CONFIGS),
    _refused(incremental.AlterConfigsResourceResponse),
)
