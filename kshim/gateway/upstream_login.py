"""The gateway's own SASL login on a connection to the cluster, before it relays on it.

Where the gateway terminates its clients' SASL (client_login.py), a client proves who it
is to the gateway, and the connection relaying its requests logs in to the cluster as the
gateway, with the SASL settings of ``--upstream-config``. The steps are the blocking
client's (kshim.client.sasl_login); this protocol runs them on the event loop, over the
connection's transport (TLS included), and hands the transport on once they end.
"""

from __future__ import annotations

import asyncio
from typing import cast

from kshim.client.frames import MalformedResponseError, decode_response, encode_request
from kshim.client.sasl import AuthenticationFailed
from kshim.client.sasl_login import Login, LoginRequest, login
from kshim.client.security import ClientSecurity
from kshim.protocol.framing import FRAME_SIZE

# A login's answers are a few hundred bytes; a larger size prefix is garbage.
MAX_LOGIN_ANSWER_BYTES = 64 * 1024
CLIENT_ID = "kshim-gateway"


class UpstreamLogin(asyncio.Protocol):
    """Runs one login; ``finished`` resolves once it has succeeded, or raises
    AuthenticationFailed (refused, or an answer that does not decode) or ConnectionError."""

    def __init__(self, security: ClientSecurity) -> None:
        self._steps: Login = login(
            security.mechanism or "", security.username or "", security.password or ""
        )
        self._asked: LoginRequest | None = None
        self._correlation_id = 0
        self._received = bytearray()
        self.transport: asyncio.Transport | None = None
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)
        self._ask(next(self._steps))

    def _ask(self, request: LoginRequest) -> None:
        assert self.transport is not None  # asked only once connected
        self._asked = request
        self._correlation_id += 1
        api_key, version, fields = request
        frame = encode_request(api_key, version, self._correlation_id, fields, client_id=CLIENT_ID)
        self.transport.write(frame)

    def data_received(self, data: bytes) -> None:
        self._received += data
        if len(self._received) < FRAME_SIZE.size:
            return
        (size,) = FRAME_SIZE.unpack_from(self._received)
        if not 0 < size <= MAX_LOGIN_ANSWER_BYTES:
            self._fail(AuthenticationFailed(f"a login answer of {size} bytes"))
            return
        if len(self._received) < FRAME_SIZE.size + size:
            return
        frame = bytes(self._received[FRAME_SIZE.size : FRAME_SIZE.size + size])
        del self._received[: FRAME_SIZE.size + size]
        self._answered(frame)

    def _answered(self, frame: bytes) -> None:
        assert self._asked is not None  # an answer comes to a request
        api_key, version, _ = self._asked
        try:
            correlation_id, answer = decode_response(api_key, version, frame)
            if correlation_id != self._correlation_id:
                raise AuthenticationFailed(f"an answer to request {correlation_id}")
            self._ask(self._steps.send(answer))
        except StopIteration:
            if not self.finished.done():
                self.finished.set_result(None)
        except (AuthenticationFailed, MalformedResponseError) as error:
            self._fail(AuthenticationFailed(f"the gateway's login to the cluster: {error}"))

    def _fail(self, error: Exception) -> None:
        if not self.finished.done():
            self.finished.set_exception(error)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_exception(
                ConnectionError(f"the cluster closed the connection during the login: {exc}")
            )
