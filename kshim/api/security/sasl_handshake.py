"""SaslHandshake (key 17): the client names its SASL mechanism.

Answered with the listener's enabled mechanisms either way; an unknown one gets
UNSUPPORTED_SASL_MECHANISM and the connection is closed. In v0 the tokens that follow come
as raw frames without Kafka headers (KIP-152 put them in SaslAuthenticate from v1).
On a listener without SASL, or once authenticated (re-authentication, KIP-368, is not
offered: SaslAuthenticate says a session lifetime of 0), Kafka answers ILLEGAL_SASL_STATE.
A second SaslHandshake while an exchange is under way gets the same answer, and then the
connection is closed as after a failed login: Kafka's SaslServerAuthenticator takes any
request but SaslAuthenticate there as an IllegalSaslStateException, an authentication
failure (ApiVersions likewise: api_versions.py).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.security.services import HandshakeServices
from kshim.broker.security.authentication import choose_mechanism, enabled_mechanisms
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse


async def handle(
    request: SaslHandshakeRequest, context: RequestContext[HandshakeServices]
) -> SaslHandshakeResponse:
    session = context.session
    enabled = enabled_mechanisms(session, dict(context.broker.config.values))
    if session.uses_sasl and not session.authenticated and session.mechanism is not None:
        # Again during the exchange: SaslServerAuthenticator answers with the request's
        # error response, then fails the login (IllegalSaslStateException).
        session.failed = True
        return SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=[])
    if not session.uses_sasl or session.authenticated:
        # As Kafka's KafkaApis, which names no mechanism in this answer.
        return SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=[])
    if not choose_mechanism(session, request.mechanism, enabled, context.broker.credentials):
        return SaslHandshakeResponse(
            error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled
        )
    session.raw_tokens = context.version == 0
    return SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=enabled)
