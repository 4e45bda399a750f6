"""SaslAuthenticate (key 36): one SASL token each way (KIP-152).

A failed step answers SASL_AUTHENTICATION_FAILED with the mechanism's message; the
connection is then closed after ``connection.failed.authentication.delay.ms``. The session
lifetime (v1+) is 0: kshim does not ask clients to re-authenticate (KIP-368).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.broker.security.authentication import step
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)


async def handle(
    request: SaslAuthenticateRequest, context: RequestContext[object]
) -> SaslAuthenticateResponse:
    session = context.session
    if not session.uses_sasl or session.authenticated or session.raw_tokens:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.illegal_sasl_state,
            # Kafka's KafkaApis says the same on a listener without SASL too.
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
        )
    if session.exchange is None:  # no SaslHandshake first: Kafka closes the connection
        session.failed = True
        return SaslAuthenticateResponse(
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate before SaslHandshake",
            auth_bytes=b"",
        )
    result = await step(session, request.auth_bytes)
    if result.error is not None:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.sasl_authentication_failed,
            error_message=result.error,
            auth_bytes=b"",
        )
    return SaslAuthenticateResponse(
        error_code=ErrorCode.none, error_message=None, auth_bytes=result.answer
    )
