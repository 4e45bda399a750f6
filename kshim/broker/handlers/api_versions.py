"""ApiVersions (key 18): the advertised version ranges (KIP-511 fallback lives in the server)."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.versions import ADVERTISED
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(ADVERTISED.items())
        ],
        "throttle_time": 0,
    }
