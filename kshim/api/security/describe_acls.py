"""DescribeAcls (key 29): the ACL bindings one filter matches, grouped by resource.

As Kafka's AclApis: a broker without an authoriser answers SECURITY_DISABLED, a caller
without DESCRIBE on the cluster CLUSTER_AUTHORIZATION_FAILED, and a filter with an
UNKNOWN part (protocol/acls.py filter_problem) INVALID_REQUEST, each in the
response's one error code. Kafka words the first refusal here as its handleDescribeAcls
does, not as Create/DeleteAcls do.
"""

from __future__ import annotations

from itertools import groupby

from kshim.api.context import RequestContext
from kshim.api.security import acl_requests
from kshim.api.services import WithAcls
from kshim.protocol.acls import (
    AclBinding,
    Operation,
    filter_problem,
)
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)

NO_AUTHORIZER_TO_DESCRIBE = "No Authorizer is configured on the broker"


async def handle(
    request: DescribeAclsRequest, context: RequestContext[WithAcls]
) -> DescribeAclsResponse:
    acls = context.broker.acls
    acl_filter = acl_requests.acl_filter(request)
    refusal = acl_requests.refusal(context, Operation.DESCRIBE)
    problem = filter_problem(acl_filter)
    if refusal is not None and refusal[0] == ErrorCode.security_disabled:
        return _error(ErrorCode.security_disabled, NO_AUTHORIZER_TO_DESCRIBE)
    if refusal is not None:
        return _error(*refusal)
    if problem is not None:
        return _error(ErrorCode.invalid_request, problem)
    return DescribeAclsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.none,
        error_message=None,
        resources=resources(acls.describe(acl_filter)),
    )


def resources(bindings: list[AclBinding]) -> list[DescribeAclsResource]:
    """``bindings`` (sorted by resource) as the response lists them: one entry per resource
    pattern, with its ACLs."""
    return [
        DescribeAclsResource(
            resource_type=resource_type,
            resource_name=resource_name,
            pattern_type=pattern_type,
            acls=[
                AclDescription(
                    principal=binding.principal,
                    host=binding.host,
                    operation=binding.operation,
                    permission_type=binding.permission,
                )
                for binding in same_resource
            ],
        )
        for (resource_type, resource_name, pattern_type), same_resource in groupby(
            bindings,
            key=lambda binding: (
                binding.resource_type,
                binding.resource_name,
                binding.pattern_type,
            ),
        )
    ]


def _error(error_code: ErrorCode, message: str | None) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=error_code, error_message=message, resources=[]
    )
