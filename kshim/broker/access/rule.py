"""What an access rule is: an API's handler, and the check in front of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kshim.broker.access.permissions import Permissions
from kshim.broker.context import RequestContext

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

# An API's handler, as the registry routes to it (registry.py).
Handler = Callable[[RequestT, RequestContext], Awaitable[ResponseT]]
# The handler behind its ACL check: answers what the principal may not do, and lets the
# handler (the last argument) answer the rest.
Check = Callable[
    [RequestT, RequestContext, Permissions, Handler[RequestT, ResponseT]], Awaitable[ResponseT]
]


@dataclass(frozen=True, slots=True)
class AccessRule(Generic[RequestT, ResponseT]):
    """An API's handler and its check; no check for an API every client may call
    (ApiVersions, and the SASL APIs that establish the principal)."""

    handle: Handler[RequestT, ResponseT]
    check: Check[RequestT, ResponseT] | None
