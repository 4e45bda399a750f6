"""CreateAcls (key 30): add ACL bindings, durable before the answer.

As Kafka's AclApis: a broker without an authoriser answers SECURITY_DISABLED, a caller
without ALTER on the cluster CLUSTER_AUTHORIZATION_FAILED, each for every binding; else
each binding gets its own result, INVALID_REQUEST for one Kafka refuses
(protocol/acls.py binding_problem), NONE once stored (a binding already there too).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.security import acl_requests
from kshim.api.services import WithAcls
from kshim.broker.security.acls.service import Answer
from kshim.protocol.acls import AclBinding
from kshim.protocol.messages.create_acls import (
    AclCreation,
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)


async def handle(
    request: CreateAclsRequest, context: RequestContext[WithAcls]
) -> CreateAclsResponse:
    bindings = [_binding(creation) for creation in request.creations]
    created = await acl_requests.changed(context, bindings, context.broker.acls.create, _refused)
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            AclCreationResult(error_code=error_code, error_message=message)
            for error_code, message in created
        ],
    )


def _refused(answer: Answer) -> Answer:
    return answer


def _binding(creation: AclCreation) -> AclBinding:
    return AclBinding.from_codes(
        resource_type=creation.resource_type,
        resource_name=creation.resource_name,
        pattern_type=creation.resource_pattern_type,
        principal=creation.principal,
        host=creation.host,
        operation=creation.operation,
        permission=creation.permission_type,
    )
