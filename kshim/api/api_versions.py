"""ApiVersions (key 18): the advertised version ranges (KIP-511 fallback lives in the server).

Every client connection starts with this request, and the answer depends only on the
version asked for, so each version's body is encoded once (kio's encoder takes a few
hundred microseconds for the ~60 entries) and returned as already encoded parts.

On a SASL listener, between SaslHandshake and the end of the exchange, Kafka's
SaslServerAuthenticator takes ApiVersions, as any request but SaslAuthenticate, as an
IllegalSaslStateException: it answers ILLEGAL_SASL_STATE with no versions, then fails the
login (the connection is closed after ``connection.failed.authentication.delay.ms``).
A second ApiVersions before SaslHandshake closes the connection unanswered (the SASL gate,
server/security/sasl_gate.py), as Kafka's IllegalStateException does.
"""

from __future__ import annotations

from functools import cache

from kshim.api.context import RequestContext
from kshim.protocol.apis import ADVERTISED, API_VERSIONS_KEY
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import Part
from kshim.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from kshim.protocol.messages.serial import encode_response


async def handle(request: ApiVersionsRequest, context: RequestContext) -> list[Part]:
    session = context.session
    if session.mechanism is not None and not session.authenticated:
        session.failed = True
        return [encoded_refusal(context.version)]
    return [encoded_answer(context.version)]


@cache
def encoded_refusal(version: int) -> bytes:
    """The answer during a SASL exchange (module docstring), in ``version``'s format."""
    refusal = ApiVersionsResponse(
        error_code=ErrorCode.illegal_sasl_state, api_keys=[], throttle_time_ms=0
    )
    return encode_response(API_VERSIONS_KEY, version, refusal)


@cache
def encoded_answer(version: int) -> bytes:
    """The body of the answer in ``version``'s format, encoded on first use."""
    return encode_response(API_VERSIONS_KEY, version, answer())


def answer() -> ApiVersionsResponse:
    """Every advertised API with its version range, and no features: a client told of a
    finalized ``transaction.version`` of 2 would switch to KIP-890's transaction protocol,
    which kshim does not serve."""
    return ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=[
            ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(ADVERTISED.items())
        ],
        throttle_time_ms=0,
    )
