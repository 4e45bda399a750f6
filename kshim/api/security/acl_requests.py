"""What the ACL APIs' handlers share: whether the caller may use them at all, and a
filter as DescribeAcls and DeleteAcls both send it (the same seven fields, Kafka's
AclBindingFilter on the wire)."""

from __future__ import annotations

from typing import Protocol

from kshim.api.context import RequestContext
from kshim.broker.security.acls.model import (
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    from_code,
)
from kshim.broker.security.acls.service import Answer


class WireFilter(Protocol):
    """DescribeAclsRequest's filter fields, and each of DeleteAclsRequest's filters."""

    @property
    def resource_type_filter(self) -> int: ...
    @property
    def resource_name_filter(self) -> str | None: ...
    @property
    def pattern_type_filter(self) -> int: ...
    @property
    def principal_filter(self) -> str | None: ...
    @property
    def host_filter(self) -> str | None: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


def refusal(context: RequestContext, operation: Operation) -> Answer | None:
    """Why the request's principal may not call an ACL API needing ``operation`` on the
    cluster, or None (the authoriser's ``refusal``)."""
    session = context.session
    return context.broker.acls.refusal(session.principal, session.client_address, operation)


def acl_filter(requested: WireFilter) -> AclFilter:
    """The filter ``requested`` in the model's terms."""
    return AclFilter(
        resource_type=from_code(ResourceType, requested.resource_type_filter),
        resource_name=requested.resource_name_filter,
        pattern_type=from_code(PatternType, requested.pattern_type_filter),
        principal=requested.principal_filter,
        host=requested.host_filter,
        operation=from_code(Operation, requested.operation),
        permission=from_code(Permission, requested.permission_type),
    )
