"""Sans-io: the requests of a client's SASL login, and what each answer means (KIP-152)::

    SaslHandshake v1       mechanism -> error_code, the listener's enabled mechanisms
    SaslAuthenticate v2    auth_bytes -> error_code, error_message, auth_bytes, as many
                           times as the mechanism takes (PLAIN once, SCRAM twice)

``login`` is a generator: it yields each request to send, (api key, version, fields), and
is sent kio's answer to it; it returns once the mechanism has completed and raises
AuthenticationFailed with the broker's message when the broker refuses (Kafka then closes
the connection) or a SCRAM answer does not verify. The blocking client
(``kshim.client.wire``) and the gateway's asynchronous logins to its cluster run the same
steps over their own connections.
"""

from __future__ import annotations

from collections.abc import Generator

from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from kshim.client.sasl import AuthenticationFailed, sasl_client
from kshim.protocol.errors import ErrorCode

SASL_HANDSHAKE = (17, 1)  # v1: the tokens go in SaslAuthenticate requests (KIP-152)
SASL_AUTHENTICATE = (36, 2)  # v2: flexible (KIP-482); served by Kafka 2.4 and later

LoginRequest = tuple[int, int, dict[str, object]]  # api key, version, kio's field names
Login = Generator[LoginRequest, object, None]


def login(mechanism: str, username: str, password: str) -> Login:
    """The steps of ``username``'s login with ``mechanism`` (module docstring)."""
    handshake = yield (*SASL_HANDSHAKE, {"mechanism": mechanism})
    if not isinstance(handshake, SaslHandshakeResponse):
        raise AuthenticationFailed(f"{type(handshake).__name__} answered SaslHandshake")
    if handshake.error_code != ErrorCode.none:
        enabled = ", ".join(handshake.mechanisms) or "none"
        raise AuthenticationFailed(
            f"SaslHandshake for {mechanism}: {ErrorCode(handshake.error_code).name.upper()} "
            f"(the listener enables SASL mechanisms: {enabled})"
        )
    exchange = sasl_client(mechanism, username, password)
    token: bytes | None = exchange.first()
    while token is not None:
        answer = yield (*SASL_AUTHENTICATE, {"auth_bytes": token})
        if not isinstance(answer, SaslAuthenticateResponse):
            raise AuthenticationFailed(f"{type(answer).__name__} answered SaslAuthenticate")
        if answer.error_code != ErrorCode.none:
            name = ErrorCode(answer.error_code).name.upper()
            said = f": {answer.error_message}" if answer.error_message else ""
            raise AuthenticationFailed(f"{mechanism} authentication as {username}: {name}{said}")
        token = exchange.step(answer.auth_bytes)
