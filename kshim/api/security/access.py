"""The access rules of the APIs that manage security itself: the ACL APIs (AclApis:
DESCRIBE on the cluster lists ACLs, ALTER creates and deletes them) and the SCRAM
credential APIs of KIP-554 (DESCRIBE on the cluster describes credentials, ALTER changes
them).

A refused request is answered as Kafka's getErrorResponse answers
CLUSTER_AUTHORIZATION_FAILED: for the ACL APIs once per binding or filter, for the
credential APIs once per user, and for DescribeAcls and DescribeUserScramCredentials
once for the request.
"""

from __future__ import annotations

from kshim.api.access.permissions import CLUSTER_REFUSED, Permissions
from kshim.api.access.rule import Handler
from kshim.api.context import RequestContext
from kshim.broker.security.acls.model import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kshim.protocol.messages.create_acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from kshim.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from kshim.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from kshim.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

REFUSED = ErrorCode.cluster_authorization_failed


async def describe_acls_rule(
    request: DescribeAclsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[DescribeAclsRequest, DescribeAclsResponse],
) -> DescribeAclsResponse:
    if permissions.allows_cluster(Operation.DESCRIBE):
        return await handle(request, context)
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=REFUSED, error_message=CLUSTER_REFUSED, resources=[]
    )


async def create_acls_rule(
    request: CreateAclsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[CreateAclsRequest, CreateAclsResponse],
) -> CreateAclsResponse:
    if permissions.allows_cluster(Operation.ALTER):
        return await handle(request, context)
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            AclCreationResult(error_code=REFUSED, error_message=CLUSTER_REFUSED)
            for _ in request.creations
        ],
    )


async def delete_acls_rule(
    request: DeleteAclsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[DeleteAclsRequest, DeleteAclsResponse],
) -> DeleteAclsResponse:
    if permissions.allows_cluster(Operation.ALTER):
        return await handle(request, context)
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteAclsFilterResult(
                error_code=REFUSED, error_message=CLUSTER_REFUSED, matching_acls=[]
            )
            for _ in request.filters
        ],
    )


async def describe_user_scram_credentials_rule(
    request: DescribeUserScramCredentialsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse],
) -> DescribeUserScramCredentialsResponse:
    if permissions.allows_cluster(Operation.DESCRIBE):
        return await handle(request, context)
    # Kafka's answer carries no message: the exception's is the error's own
    # (ApiError.fromThrowable).
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0,
        error_code=REFUSED,
        error_message=None,
        results=[
            DescribeUserScramCredentialsResult(
                user=user.name, error_code=REFUSED, error_message=None, credential_infos=[]
            )
            for user in request.users or ()
        ],
    )


async def alter_user_scram_credentials_rule(
    request: AlterUserScramCredentialsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse],
) -> AlterUserScramCredentialsResponse:
    if permissions.allows_cluster(Operation.ALTER):
        return await handle(request, context)
    users = {change.name for change in request.deletions}
    users.update(change.name for change in request.upsertions)
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResult(user=user, error_code=REFUSED, error_message=None)
            for user in sorted(users)
        ],
    )
