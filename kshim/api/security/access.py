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

from collections.abc import Callable

from kshim.api.access.permissions import CLUSTER_REFUSED, Permissions
from kshim.api.access.rule import all_or_nothing
from kshim.api.context import RequestContext
from kshim.protocol.acls import Operation
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


def _allows_cluster(operation: Operation) -> Callable[[Permissions, object], bool]:
    def allows(permissions: Permissions, _request: object) -> bool:
        return permissions.allows_cluster(operation)

    return allows


def _refused_describe_acls(
    _request: DescribeAclsRequest, _context: RequestContext
) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=REFUSED, error_message=CLUSTER_REFUSED, resources=[]
    )


def _refused_create_acls(
    request: CreateAclsRequest, _context: RequestContext
) -> CreateAclsResponse:
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            AclCreationResult(error_code=REFUSED, error_message=CLUSTER_REFUSED)
            for _ in request.creations
        ],
    )


def _refused_delete_acls(
    request: DeleteAclsRequest, _context: RequestContext
) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteAclsFilterResult(
                error_code=REFUSED, error_message=CLUSTER_REFUSED, matching_acls=[]
            )
            for _ in request.filters
        ],
    )


def _refused_describe_credentials(
    request: DescribeUserScramCredentialsRequest, _context: RequestContext
) -> DescribeUserScramCredentialsResponse:
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


def _refused_alter_credentials(
    request: AlterUserScramCredentialsRequest, _context: RequestContext
) -> AlterUserScramCredentialsResponse:
    users = {change.name for change in request.deletions}
    users.update(change.name for change in request.upsertions)
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResult(user=user, error_code=REFUSED, error_message=None)
            for user in sorted(users)
        ],
    )


describe_acls_rule = all_or_nothing(_allows_cluster(Operation.DESCRIBE), _refused_describe_acls)
create_acls_rule = all_or_nothing(_allows_cluster(Operation.ALTER), _refused_create_acls)
delete_acls_rule = all_or_nothing(_allows_cluster(Operation.ALTER), _refused_delete_acls)
describe_user_scram_credentials_rule = all_or_nothing(
    _allows_cluster(Operation.DESCRIBE), _refused_describe_credentials
)
alter_user_scram_credentials_rule = all_or_nothing(
    _allows_cluster(Operation.ALTER), _refused_alter_credentials
)
