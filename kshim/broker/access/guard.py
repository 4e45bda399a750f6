"""Composes each API's handler with its access rule (table.py), for the registry.

The composed handler costs nothing more than an attribute check or two when ACLs do not
apply: with no authoriser configured (``authorizer.class.name`` empty), or for a super
user, it returns the handler's own coroutine, so Produce and Fetch without ACLs allocate
and decode nothing more than before. Otherwise it runs the API's check, which answers
what the principal may not do and lets the handler answer the rest.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.access.permissions import Permissions
from kshim.broker.access.rule import Handler
from kshim.broker.access.table import RULES
from kshim.broker.context import RequestContext


def guarded(api_key: int, handle: Handler[Any, object]) -> Handler[Any, object]:
    """``handle`` behind the access rule of ``api_key``; raises LookupError for an API
    without one, or whose rule guards another handler (a route and its rule out of
    step)."""
    rule = RULES.get(api_key)
    if rule is None:
        raise LookupError(f"API {api_key} has no access rule (kshim/broker/access/table.py)")
    if rule.handle is not handle:
        raise LookupError(f"the access rule of API {api_key} guards another handler")
    check = rule.check
    if check is None:
        return handle

    def guarded_handle(request: Any, context: RequestContext) -> Any:
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
