"""FindCoordinator (key 10): this single broker coordinates every group and transaction."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol.errors import ErrorCode

GROUP_KEY_TYPE = 0
KNOWN_KEY_TYPES = (GROUP_KEY_TYPE, 1)  # 1: transaction coordinator


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    host, port = context.broker.config.advertised_address()
    node_id = context.broker.config.node_id
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    error = ErrorCode.none if key_type in KNOWN_KEY_TYPES else ErrorCode.invalid_request
    found = {
        "error_code": error,
        "error_message": None if error == ErrorCode.none else f"unknown key type {key_type}",
        "node_id": node_id if error == ErrorCode.none else -1,
        "host": host if error == ErrorCode.none else "",
        "port": port if error == ErrorCode.none else -1,
    }
    keys = getattr(request, "coordinator_keys", ())
    return {
        "throttle_time": 0,
        **found,
        "coordinators": [{"key": key, **found} for key in keys],
    }
