"""What an access rule is: the check in front of an API's handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from kshim.api.access.permissions import Permissions
from kshim.api.context import RequestContext

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

# An API's handler, as the route table routes to it (routes.py).
Handler = Callable[[RequestT, RequestContext], Awaitable[ResponseT]]
# The handler behind its ACL check: answers what the principal may not do, and lets the
# handler (the last argument) answer the rest.
Check = Callable[
    [RequestT, RequestContext, Permissions, Handler[RequestT, ResponseT]], Awaitable[ResponseT]
]


def all_or_nothing(
    allows: Callable[[Permissions, RequestT], bool],
    refused: Callable[[RequestT, RequestContext], ResponseT],
) -> Check[RequestT, ResponseT]:
    """The rule of an API whose request is allowed or refused whole (one group, one
    transactional id, the cluster): the handler's answer when ``allows``, else
    ``refused``'s, an error in the response's own shape (Kafka's getErrorResponse)."""

    async def check(
        request: RequestT,
        context: RequestContext,
        permissions: Permissions,
        handle: Handler[RequestT, ResponseT],
    ) -> ResponseT:
        if allows(permissions, request):
            return await handle(request, context)
        return refused(request, context)

    return check
