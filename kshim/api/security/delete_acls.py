"""DeleteAcls (key 31): delete the ACL bindings each filter matches, durable before the
answer.

As Kafka's AclApis: a broker without an authoriser answers SECURITY_DISABLED, a caller
without ALTER on the cluster CLUSTER_AUTHORIZATION_FAILED, each for every filter; else
each filter lists the bindings it matched, all deleted in one commit, or says
INVALID_REQUEST for an UNKNOWN part (protocol/acls.py filter_problem).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.security import acl_requests
from kshim.api.services import WithAcls
from kshim.broker.security.acls.service import Answer, DeleteResult
from kshim.protocol.acls import AclBinding
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)


async def handle(
    request: DeleteAclsRequest, context: RequestContext[WithAcls]
) -> DeleteAclsResponse:
    filters = [acl_requests.acl_filter(requested) for requested in request.filters]
    deleted = await acl_requests.changed(context, filters, context.broker.acls.delete, _refused)
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteAclsFilterResult(
                error_code=result.error_code,
                error_message=result.error_message,
                matching_acls=[_matching(binding) for binding in result.deleted],
            )
            for result in deleted
        ],
    )


def _refused(answer: Answer) -> DeleteResult:
    error_code, message = answer
    return DeleteResult(error_code, message, [])


def _matching(binding: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=binding.resource_type,
        resource_name=binding.resource_name,
        pattern_type=binding.pattern_type,
        principal=binding.principal,
        host=binding.host,
        operation=binding.operation,
        permission_type=binding.permission,
    )
