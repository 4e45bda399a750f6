"""A TLS listener's accept loop: each connection is looked at before its handshake.

asyncio's and uvloop's servers start a TLS handshake the moment they accept, and their
transports read a client's first bytes before a protocol could hold them back, so a
connection cannot be refused cheaply once it is theirs. Here the listening socket is
kshim's own: a new connection's address is checked first (``admit``: the failed-login
throttle, max.connections), and only an admitted socket is handed to the event loop with
TLS (``connect_accepted_socket``), whose handshake then runs as the server's would. A
refused socket is closed, at once or after its hold (held_refusals.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from kshim.server.security.held_refusals import HeldRefusals, Refused
from kshim.server.security.login_throttle import Login

log = logging.getLogger(__name__)
BACKLOG = 1024


@dataclass(eq=False, slots=True)
class TlsAcceptor:
    """``protocol`` serves an admitted connection once its handshake is done; ``dropped``
    is told of one whose handshake failed."""

    context: ssl.SSLContext
    protocol: Callable[[Login], asyncio.BaseProtocol]
    admit: Callable[[str], Login | Refused]
    dropped: Callable[[Login], None]
    refusals: HeldRefusals
    handshake_timeout_s: float
    _socket: socket.socket | None = field(default=None, init=False)
    _accepting: asyncio.Task[None] | None = field(default=None, init=False)
    handshakes: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    async def listen(self, host: str, port: int) -> tuple[str, int]:
        """Binds and starts accepting; returns the bound address. Raises OSError."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _, address = infos[0]
        listening = socket.socket(family, kind, proto)
        try:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listening.bind(address)
            listening.listen(BACKLOG)
            listening.setblocking(False)
        except OSError:
            listening.close()
            raise
        self._socket = listening
        self._accepting = asyncio.create_task(self._accept_loop(listening))
        bound = listening.getsockname()
        return bound[0], bound[1]

    async def _accept_loop(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, peer = await loop.sock_accept(listening)
            except OSError as error:  # out of descriptors, a reset before accept: go on
                log.warning("accepting a TLS connection failed: %s", error)
                await asyncio.sleep(0.05)
                continue
            address = peer[0] if isinstance(peer, tuple) else ""
            admitted = self.admit(address)
            if isinstance(admitted, Refused):
                self.refusals.hold(connection.close, admitted.hold_s)
                continue
            task = asyncio.create_task(self._handshake(connection, peer, admitted))
            self.handshakes.add(task)
            task.add_done_callback(self.handshakes.discard)

    async def _handshake(self, connection: socket.socket, peer: object, login: Login) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: self.protocol(login),
                connection,
                ssl=self.context,
                ssl_handshake_timeout=self.handshake_timeout_s,
            )
        except OSError as error:  # ssl.SSLError, TimeoutError and resets among them
            # Kafka logs "Failed authentication with <address> (SSL handshake failed)".
            reason = str(error) or type(error).__name__
            log.info("closing connection from %s: TLS handshake failed: %s", peer, reason)
            connection.close()
            self.dropped(login)

    def close(self) -> None:
        """Stops accepting; handshakes under way are cancelled."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self.handshakes:
            task.cancel()
        if self._socket is not None:
            self._socket.close()

    async def wait_closed(self) -> None:
        tasks = [task for task in (self._accepting, *self.handshakes) if task is not None]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
