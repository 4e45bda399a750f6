"""Composes an API's handler with its access rule, for the route table (routes.py).

The composed handler costs nothing more than an attribute check or two when ACLs do not
apply: with no authoriser configured (``authorizer.class.name`` empty), or for a super
user, it returns the handler's own coroutine, so Produce and Fetch without ACLs allocate
and decode nothing more than before. Otherwise it runs the API's check, which answers
what the principal may not do and lets the handler answer the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable

from kshim.api.access.permissions import Permissions
from kshim.api.access.rule import Check, Handler, RequestT, ResponseT
from kshim.api.context import RequestContext


def guarded(
    handle: Handler[RequestT, ResponseT], check: Check[RequestT, ResponseT] | None
) -> Handler[RequestT, ResponseT]:
    """``handle`` behind ``check``; ``handle`` itself when there is no check (an API every
    client may call)."""
    if check is None:
        return handle

    def guarded_handle(request: RequestT, context: RequestContext) -> Awaitable[ResponseT]:
        # A plain function returning the coroutine it picks: no frame of its own to await.
        acls = context.broker.acls
        if not acls.enabled:
            return handle(request, context)
        principal = context.session.principal
        if acls.is_super(principal):
            return handle(request, context)
        permissions = Permissions(acls, principal, context.session.client_address)
        return check(request, context, permissions, handle)

    return guarded_handle
