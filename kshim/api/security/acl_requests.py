"""What the ACL APIs' handlers share: whether the caller may use them at all, a change
(CreateAcls, DeleteAcls) allowed or refused whole, and a filter as DescribeAcls and
DeleteAcls both send it (the same seven fields, Kafka's AclBindingFilter on the wire)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, TypeVar

from kshim.api.context import RequestContext
from kshim.api.services import WithAcls
from kshim.broker.security.acls.service import Answer
from kshim.protocol.acls import (
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    from_code,
)

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


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


def refusal(context: RequestContext[WithAcls], operation: Operation) -> Answer | None:
    """Why the request's principal may not call an ACL API needing ``operation`` on the
    cluster, or None (the authoriser's ``refusal``)."""
    session = context.session
    return context.broker.acls.refusal(session.principal, session.client_address, operation)


async def changed(
    context: RequestContext[WithAcls],
    items: list[ItemT],
    change: Callable[[list[ItemT]], list[ResultT]],
    refused: Callable[[Answer], ResultT],
) -> list[ResultT]:
    """Each of ``items``' result of ``change``, which runs in a thread (the ACL store
    commits and fsyncs); or, when the principal may not ALTER the cluster, the refusal as
    every item's result (``refused``): as Kafka's AclApis, a change is refused whole."""
    answer = refusal(context, Operation.ALTER)
    if answer is not None:
        return [refused(answer)] * len(items)
    return await asyncio.to_thread(change, items)


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
