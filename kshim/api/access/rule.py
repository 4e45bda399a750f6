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
