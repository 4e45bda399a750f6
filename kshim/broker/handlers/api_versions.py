"""ApiVersions (key 18): the advertised version ranges (KIP-511 fallback lives in the server).

Every client connection starts with this request, and the answer depends only on the
version asked for, so each version's body is encoded once (kio's encoder takes a few
hundred microseconds for the ~60 entries).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, API_VERSIONS_KEY
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import Part


async def handle(request: Any, context: RequestContext) -> list[Part]:
    return [encoded_answer(context.header.api_version)]


@cache
def encoded_answer(version: int) -> bytes:
    return codec.encode_response(API_VERSIONS_KEY, version, answer())


def answer() -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(ADVERTISED.items())
        ],
        "throttle_time": 0,
    }
