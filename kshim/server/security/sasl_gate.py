"""A SASL listener's connection before it has authenticated.

Kafka's SaslServerAuthenticator serves nothing but ApiVersions, SaslHandshake and
SaslAuthenticate until the exchange completes; any other request closes the connection
(IllegalSaslStateException). Requests are taken one at a time here, not pipelined: what a
frame is (a request, or a raw token after SaslHandshake v0) depends on the answer to the
one before. Frames are held to Kafka's ``sasl.server.max.receive.size`` (512 KiB) until
then, so an unauthenticated peer cannot make the broker buffer a 100 MB request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kshim.broker.broker import Broker
from kshim.broker.security.authentication import delay_failure, step
from kshim.broker.security.session import Session
from kshim.protocol.apis import API_VERSIONS_KEY
from kshim.protocol.fetch_response import Part
from kshim.protocol.framing import frame
from kshim.protocol.headers import RequestHeader
from kshim.server.dispatch import Call, ProtocolViolation, decode, respond
from kshim.server.request_stream import RequestStream

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
ALLOWED_BEFORE_AUTHENTICATION = frozenset(
    {API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY}
)
SASL_MAX_RECEIVE_BYTES = 512 * 1024  # Kafka's sasl.server.max.receive.size default
# A raw token has no header: this names it in log lines.
RAW_TOKEN = RequestHeader(SASL_AUTHENTICATE_KEY, 0, -1, None)

InFlight = tuple[RequestHeader, "asyncio.Task[list[Part] | None]"]


class AuthenticationEnded(Exception):
    """The connection ends without having authenticated (failed, or the peer left)."""


async def authenticate(
    stream: RequestStream,
    broker: Broker,
    session: Session,
    answer: Callable[[InFlight], Awaitable[None]],
    client_host: str,
    ended: Callable[[bool], None] | None = None,
) -> None:
    """Serves the connection until it has authenticated, each request's answer queued
    with ``answer`` (the connection writes them in order); raises AuthenticationEnded,
    after Kafka's delay when authentication failed, or ProtocolViolation. ``ended`` is
    told whether it failed once it has succeeded or failed (before the delay)."""
    stream.limit_frames(SASL_MAX_RECEIVE_BYTES)
    # Kafka's SaslServerAuthenticator answers one ApiVersions before SaslHandshake
    # (HANDSHAKE_OR_VERSIONS_REQUEST, then HANDSHAKE_REQUEST); KIP-511's fallback answer
    # does not count, so the client may ask again at a version it was offered.
    versions_answered = False
    while not session.authenticated:
        request_frame = await stream.next_frame()
        if request_frame is None:
            raise AuthenticationEnded("closed before authenticating")
        if session.raw_tokens:
            header = RAW_TOKEN
            task = asyncio.create_task(_raw_token(session, bytes(request_frame)))
        else:
            call = _allowed_before_authentication(request_frame, session, versions_answered)
            header = call.header
            versions_answered |= header.api_key == API_VERSIONS_KEY and call.request is not None
            task = asyncio.create_task(respond(call, broker, client_host, None, session))
        await asyncio.wait([task])
        if session.failed:
            if ended is not None:
                ended(True)
            await delay_failure(broker.config, session)
            await answer((header, task))
            raise AuthenticationEnded(f"authentication failed ({session.mechanism or 'SASL'})")
        await answer((header, task))
    if ended is not None:
        ended(False)
    stream.limit_frames(broker.config.get_int("socket.request.max.bytes"))


def _allowed_before_authentication(
    request_frame: bytes | bytearray, session: Session, versions_answered: bool
) -> Call:
    """The request decoded, if a client may send it before it has authenticated."""
    call = decode(request_frame)
    api_key = call.header.api_key
    if api_key not in ALLOWED_BEFORE_AUTHENTICATION:
        raise ProtocolViolation(f"api {api_key} before SASL authentication completed")
    if api_key == API_VERSIONS_KEY and session.mechanism is None and versions_answered:
        raise ProtocolViolation("a second ApiVersions before SaslHandshake")  # Kafka: no answer
    return call


async def _raw_token(session: Session, token: bytes) -> list[Part] | None:
    """A SaslHandshake v0 token: the answer as a bare size-prefixed frame, or none when
    the step failed (the raw form has no way to say why; the connection is closed)."""
    result = await step(session, token)
    if result.error is not None:
        return None
    return frame([result.answer])
