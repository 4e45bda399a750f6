"""SASL terminated at the gateway: clients log in to the gateway with kshim's users.

With ``--listener-security SASL_PLAINTEXT`` or ``SASL_SSL`` a client's SaslHandshake and
SaslAuthenticate are answered by the gateway, by the broker's own handlers
(api/security/), against the gateway's users: the SCRAM credentials of its data directory
(``kshim users add --data-dir``, or AlterUserScramCredentials through the gateway, which
it answers too: KIP-554) and the PLAIN users of its listener's JAAS setting, exactly as the
broker's listener does. The connection relaying the client logs in to the cluster as the
gateway (upstream_login.py). Before the client has authenticated, only ApiVersions (relayed)
and the SASL requests are taken, in frames of at most 512 KiB, and any other request closes
the connection, as Kafka's SaslServerAuthenticator does; a failed login is answered after
``connection.failed.authentication.delay.ms`` and the connection closed (KIP-306).

Requests are routed here per connection (``ConnectionLogin``, a relay's ``Served``), in
front of what else the gateway serves (the full-data views): an authenticated client's
requests cost one look at the API key more than before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kshim.api.context import RequestContext
from kshim.api.security import (
    alter_user_scram_credentials,
    describe_user_scram_credentials,
    sasl_authenticate,
    sasl_handshake,
)
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.authentication import delay_failure, step
from kshim.broker.security.credentials import Credentials
from kshim.broker.security.session import Session
from kshim.gateway.full.requests import RELAY, Decoded, Route, Routing
from kshim.gateway.local_steps import Served
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.framing import FrameError
from kshim.protocol.headers import REQUEST_HEADER_FIXED
from kshim.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kshim.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
)
from kshim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kshim.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kshim.server.dispatch import Call, DecodingFailed, ProtocolViolation, decode, encoded_answer
from kshim.server.security.sasl_gate import (
    ALLOWED_BEFORE_AUTHENTICATION,
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SASL_MAX_RECEIVE_BYTES,
)

DESCRIBE_USER_SCRAM_CREDENTIALS_KEY = 50
ALTER_USER_SCRAM_CREDENTIALS_KEY = 51
# A raw SASL token after SaslHandshake v0 (KIP-152) has no header: this key names it.
RAW_TOKEN_KEY = -1

ANSWERED_HERE = frozenset(
    {
        SASL_HANDSHAKE_KEY,
        SASL_AUTHENTICATE_KEY,
        DESCRIBE_USER_SCRAM_CREDENTIALS_KEY,
        ALTER_USER_SCRAM_CREDENTIALS_KEY,
    }
)
# The versions a client is offered of the APIs answered here: the broker's.
ANSWERED_CAPS = {api_key: ADVERTISED[api_key][1] for api_key in ANSWERED_HERE}


@dataclass(frozen=True, slots=True)
class GatewayUsers:
    """The services the SASL and SCRAM handlers read (api/security/services.py): the
    listener's settings (its enabled mechanisms, PLAIN users, failure delay) and the users."""

    config: BrokerConfig
    credentials: Credentials
    listener: str  # the listener's name and security protocol: SASL_PLAINTEXT or SASL_SSL

    def connection(self, inner: Served | None, peer: Callable[[], str]) -> ConnectionLogin:
        """The login of one client connection, in front of ``inner``; ``peer`` tells the
        client's IP address once connected."""
        session = Session(self.listener, self.listener, authenticated=False)
        return ConnectionLogin(self, session, inner, peer)


class ConnectionLogin:
    """One client connection's login, and the requests the gateway answers for it."""

    def __init__(
        self, users: GatewayUsers, session: Session, inner: Served | None, peer: Callable[[], str]
    ) -> None:
        self._users = users
        self.session = session
        self._inner = inner
        self._peer = peer

    @property
    def closing(self) -> bool:
        """Whether the connection closes once the answer just made has gone out."""
        return self.session.failed

    def route(self, head: bytes | memoryview, size: int) -> Routing:
        session = self.session
        if not session.authenticated and size > SASL_MAX_RECEIVE_BYTES:
            raise FrameError(f"a {size}-byte request before SASL authentication completed")
        if session.raw_tokens:
            if len(head) < size:
                return Routing(Route.MORE)
            return Routing(Route.ANSWER, request=(RAW_TOKEN_KEY, 0, -1, bytes(head)))
        if len(head) < REQUEST_HEADER_FIXED.size:
            return Routing(Route.MORE)
        api_key = REQUEST_HEADER_FIXED.unpack_from(head, 0)[0]
        if not session.authenticated and api_key not in ALLOWED_BEFORE_AUTHENTICATION:
            # Kafka's SaslServerAuthenticator takes ApiVersions and the SASL requests,
            # nothing else, until the exchange completes.
            raise FrameError(f"api {api_key} before SASL authentication completed")
        if api_key in ANSWERED_HERE:
            return self._answered_here(head, size)
        return RELAY if self._inner is None else self._inner.route(head, size)

    def _answered_here(self, head: bytes | memoryview, size: int) -> Routing:
        if len(head) < size:
            return Routing(Route.MORE)
        try:
            call = decode(bytes(head))
        except (ProtocolViolation, DecodingFailed) as error:  # closed, as the broker closes
            raise FrameError(str(error)) from error
        header = call.header
        decoded: Decoded = (header.api_key, header.api_version, header.correlation_id, call)
        return Routing(Route.ANSWER, request=decoded)

    async def answer(self, request: Decoded) -> bytes | None:
        api_key, _, _, body = request
        if api_key == RAW_TOKEN_KEY:
            assert isinstance(body, bytes)  # route() keeps a raw token's bytes
            return await self._raw_token(body)
        if api_key not in ANSWERED_HERE:
            assert self._inner is not None  # nothing else is routed here to be answered
            return await self._inner.answer(request)
        assert isinstance(body, Call)  # _answered_here decoded it
        self.session.client_address = self._peer()
        context = RequestContext(body.header, self._users, session=self.session)
        response = await _handled(body.request, context)
        if self.session.failed:
            await delay_failure(self._users.config, self.session)
        answer = bytearray()
        for part in encoded_answer(body.header, response)[1:]:  # after the size
            assert isinstance(part, bytes | memoryview)  # typed responses encode to bytes
            answer += part
        return bytes(answer)

    async def _raw_token(self, token: bytes) -> bytes | None:
        """A SaslHandshake v0 token: the answer as a bare token; a failure has no way to say
        why in this form, so the connection is closed without one (as the broker does)."""
        result = await step(self.session, token)
        if result.error is not None:
            await delay_failure(self._users.config, self.session)
            return None
        return result.answer

    async def prepare(self, request: Decoded) -> None:
        assert self._inner is not None  # only the inner service prepares requests
        await self._inner.prepare(request)


async def _handled(request: object, context: RequestContext[GatewayUsers]) -> object:
    """The broker's handler's answer to ``request``, one of ANSWERED_HERE's."""
    if isinstance(request, SaslHandshakeRequest):
        return await sasl_handshake.handle(request, context)
    if isinstance(request, SaslAuthenticateRequest):
        return await sasl_authenticate.handle(request, context)
    if isinstance(request, DescribeUserScramCredentialsRequest):
        return await describe_user_scram_credentials.handle(request, context)
    assert isinstance(request, AlterUserScramCredentialsRequest)  # the last one routed here
    return await alter_user_scram_credentials.handle(request, context)
