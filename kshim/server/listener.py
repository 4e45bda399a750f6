"""The listeners: each of ``listeners`` bound with its security protocol (TLS where it says
SSL), connections accepted (up to ``max.connections`` in all, fewer when the open-file limit
is lower: descriptor_limit.py) and served, their requests' bytes within the broker's
``queued.max.request.bytes`` (request_budget.py).

Each connection gets a Session naming its listener and principal: ``User:ANONYMOUS``, the
subject of its TLS client certificate, or (on a SASL listener, once authenticated) its
SASL user.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kshim.broker.broker import Broker
from kshim.broker.config.listeners import Listener
from kshim.broker.lifecycle import BrokerRunner
from kshim.broker.security.principal_mapping import NoMatchingRule, Rule, parse_rules
from kshim.broker.security.session import ANONYMOUS, Session
from kshim.protocol import schema_preload
from kshim.protocol.apis import served_versions
from kshim.server.connection import Connection
from kshim.server.descriptor_limit import connection_limits
from kshim.server.idle_connections import IdleConnections
from kshim.server.metrics.on_demand import OnDemandMetrics
from kshim.server.metrics.request_metrics import RequestMetrics
from kshim.server.request_budget import RequestBudget
from kshim.server.request_stream import RequestStream
from kshim.server.security.certificate import certificate_principal
from kshim.server.security.held_refusals import HeldRefusals, Refused
from kshim.server.security.login_throttle import Login, LoginThrottle
from kshim.server.security.sasl_gate import SASL_MAX_RECEIVE_BYTES
from kshim.server.security.tls import TlsConfigError, server_context
from kshim.server.security.tls_acceptor import TlsAcceptor

if TYPE_CHECKING:
    from kshim.server.metrics.service import BrokerMetrics


log = logging.getLogger(__name__)
# Refused connections held before they are closed, at most (held_refusals.py): a descriptor
# each, well under max.connections' default.
MAX_HELD_REFUSALS = 1024


class ListenError(Exception):
    """The listening address cannot be bound (in use, not local, not resolvable): the
    address, and the system's error as ``cause``."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(f"cannot listen on {host}:{port}")
        self.cause = cause


class KafkaServer:
    def __init__(self, broker: Broker, metrics_required: bool = False) -> None:
        """``metrics_required``: a metrics address in use is an error even when it is the
        default one (``kshim serve``; an embedded broker then serves none, with a warning)."""
        self.broker = broker
        self._metrics_required = metrics_required
        self._servers: list[asyncio.Server] = []
        self._runner = BrokerRunner(broker)
        # Each open connection's admission (given back when it closes).
        self._connections: dict[Connection, Login] = {}
        self._all_closed: asyncio.Future[None] | None = None  # stop() waits for it
        self._max_connections = broker.config.get_int("max.connections")
        self._max_frame_size = broker.config.get_int("socket.request.max.bytes")
        # Kafka's -1 (any value not above 0) for no bound, as its SocketServer reads it.
        queued_bytes = broker.config.get_int("queued.max.request.bytes")
        self.request_budget = RequestBudget(queued_bytes if queued_bytes > 0 else None)
        # A TLS handshake not completed in this time is dropped (kshim.ssl.handshake.timeout.ms).
        self._tls_handshake_timeout_s = (
            broker.config.get_int("kshim.ssl.handshake.timeout.ms") / 1000
        )
        self.metrics: OnDemandMetrics | None = None
        # Each listener's bound host:port by name (the connections' label in the metrics).
        self.bound: dict[str, tuple[str, int]] = {}
        self._open: dict[str, int] = {}  # open connections by listener name
        self._acceptors: list[TlsAcceptor] = []  # the TLS listeners
        self._throttle = LoginThrottle(
            broker.config.get_int("kshim.failed.authentication.burst"),
            broker.config.get_int("kshim.failed.authentication.rate"),
        )
        self._refusals = HeldRefusals(MAX_HELD_REFUSALS)
        self._idle = IdleConnections(
            broker.config.get_int("connections.max.idle.ms"), self._connections.keys
        )

    async def start(self) -> tuple[str, int]:
        """Starts the broker and listening; returns the first listener's bound (host, port)
        (``bound`` has every listener's). Raises ListenError, or TlsConfigError or
        MappingRuleError for unusable security settings."""
        listeners = self.broker.config.listeners()
        contexts = {
            listener.name: self._tls(listener) for listener in listeners if listener.uses_tls
        }
        rules = parse_rules(self.broker.config.values["ssl.principal.mapping.rules"])
        # Every served version's codec is at hand before the first request: an import
        # mid-run could fail (protocol/schema_preload.py).
        schema_preload.preload(served_versions())
        await self._runner.start()
        # Once the store's files are open: its descriptors are kept from the connections.
        limits = connection_limits(
            self._max_connections,
            self.broker.config.get_int("kshim.max.open.files"),
            MAX_HELD_REFUSALS,
        )
        self._max_connections = limits.connections
        self._refusals = HeldRefusals(limits.held_refusals)
        for listener in listeners:
            await self._listen(listener, contexts.get(listener.name), rules)
        self._idle.start()
        # No listening line here: the caller reports the address (``kshim serve`` prints
        # it once, with the data directory).
        # Nothing is counted for metrics nobody can scrape (kshim.metrics.listen empty, or
        # its default address taken): requests then pay nothing for them. What serves them
        # is loaded at the endpoint's first connection (on_demand.py).
        metrics = OnDemandMetrics(self._load_metrics)
        try:
            served = metrics.start(self.broker.config, self._metrics_required)
        except Exception:
            await self.stop()
            raise
        if served:
            self.metrics = metrics
        return next(iter(self.bound.values()))

    def _load_metrics(self, requests: RequestMetrics) -> BrokerMetrics:
        # Imported only here: prometheus_client costs about 70 ms and 4.6 MB.
        from kshim.server.metrics.service import BrokerMetrics

        return BrokerMetrics(
            self.broker, self._connection_counts, self.request_budget, self.bound, requests
        )

    def _tls(self, listener: Listener) -> ssl.SSLContext:
        try:
            return server_context(self.broker.config, listener.name)
        except TlsConfigError as error:
            raise TlsConfigError(f"listener {listener.name}: {error}") from error

    async def _listen(
        self, listener: Listener, context: ssl.SSLContext | None, rules: list[Rule]
    ) -> None:
        # A SASL listener's connections are held to SASL's frame bound from their first
        # byte: bytes that came with the connection are read before the gate can lower it.
        max_frame = SASL_MAX_RECEIVE_BYTES if listener.uses_sasl else self._max_frame_size

        def stream(login: Login | None = None) -> asyncio.BaseProtocol:
            return RequestStream(
                max_frame, lambda s: self._accept(s, listener, rules, login), self.request_budget
            )

        try:
            if context is not None:
                bound = await self._listen_tls(listener, context, stream)
            else:
                server = await asyncio.get_running_loop().create_server(
                    stream, listener.host, listener.port, reuse_address=True
                )
                self._servers.append(server)
                bound = server.sockets[0].getsockname()
        except OSError as error:
            await self.stop()  # the stores were opened: flush and close them
            raise ListenError(listener.host, listener.port, error) from error
        self.bound[listener.name] = (bound[0], bound[1])
        self._open[listener.name] = 0
        self.broker.endpoints.bound(listener.name, bound[1])

    async def _listen_tls(
        self,
        listener: Listener,
        context: ssl.SSLContext,
        stream: Callable[[Login], asyncio.BaseProtocol],
    ) -> tuple[str, int]:
        """A TLS listener, its connections admitted before their handshake (a peer the
        failed-login throttle holds back costs an accept, a hold and a close)."""

        def admit(address: str) -> Login | Refused:
            return self._admitted(address, listener)

        acceptor = TlsAcceptor(
            context, stream, admit, self._settled, self._refusals, self._tls_handshake_timeout_s
        )
        self._acceptors.append(acceptor)
        return await acceptor.listen(listener.host, listener.port)

    def _admitted(self, address: str, listener: Listener) -> Login | Refused:
        """A new connection's login if it is served: under max.connections (else closed at
        once), and on a SASL listener from an address the failed-login throttle admits
        (else held until the address would be admitted)."""
        handshakes = sum(len(acceptor.handshakes) for acceptor in self._acceptors)
        if len(self._connections) + handshakes >= self._max_connections:
            return Refused(0.0)
        if not listener.uses_sasl:
            return Login(address, reserved=False)
        now = time.monotonic()
        login = self._throttle.admit(address, now)
        return Refused(self._throttle.wait_s(address, now)) if login is None else login

    def _settled(self, login: Login, failed: bool = False) -> None:
        self._throttle.settle(login, failed, time.monotonic())

    def _connection_counts(self) -> dict[str, int]:
        return {f"{host}:{port}": self._open[name] for name, (host, port) in self.bound.items()}

    def _accept(
        self, stream: RequestStream, listener: Listener, rules: list[Rule], login: Login | None
    ) -> None:
        """Serves a new connection; ``login`` is its admission when it was admitted before
        its TLS handshake, None when it is to be admitted here."""
        transport = stream.transport
        assert transport is not None
        if login is None:
            peer = transport.get_extra_info("peername")
            admitted = self._admitted(peer[0] if isinstance(peer, tuple) else "", listener)
            if isinstance(admitted, Refused):
                transport.pause_reading()
                self._refusals.hold(transport.close, admitted.hold_s)
                return
            login = admitted
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session = _session(transport, listener, rules)
        if session is None:
            transport.close()
            self._settled(login)
            return
        observe = None if self.metrics is None else self.metrics.requests.observe
        connection = Connection(stream, self.broker, session, self, observe)
        self._connections[connection] = login
        self._open[listener.name] += 1
        connection.start()

    def authentication_ended(self, connection: Connection, failed: bool) -> None:
        """A connection's SASL exchange ended (connection.py's ConnectionEvents)."""
        self._settled(self._connections[connection], failed)

    def closed(self, connection: Connection) -> None:
        """A connection has ended (connection.py's ConnectionEvents)."""
        login = self._connections.pop(connection)
        self._open[connection.session.listener] -= 1
        self._settled(login, connection.session.failed)  # it left before authentication ended
        if not self._connections and self._all_closed is not None:
            self._all_closed.set_result(None)
            self._all_closed = None

    async def stop(self) -> None:
        """Stops accepting, drops open connections, then stops the broker (its background
        jobs, then its stores)."""
        await self._idle.stop()
        if self.metrics is not None:
            self.metrics.stop()
        for server in self._servers:
            server.close()
        for acceptor in self._acceptors:
            acceptor.close()
        self._refusals.close_all()
        if self._connections:
            self._all_closed = asyncio.get_running_loop().create_future()
            all_closed = self._all_closed
            for connection in list(self._connections):
                connection.abort()
            await all_closed
        for acceptor in self._acceptors:
            await acceptor.wait_closed()
        self._acceptors = []
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        await self._runner.stop()


def _session(
    transport: asyncio.BaseTransport, listener: Listener, rules: list[Rule]
) -> Session | None:
    """A new connection's session, or None when its certificate maps to no principal."""
    peer = transport.get_extra_info("peername")
    principal = ANONYMOUS
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is not None:
        try:
            principal = certificate_principal(ssl_object, rules)
        except NoMatchingRule as error:
            log.info("closing connection from %s: %s", peer, error)
            return None
    return Session(
        listener=listener.name,
        security_protocol=listener.security_protocol,
        principal=principal,
        client_address=peer[0] if isinstance(peer, tuple) else "",
        authenticated=not listener.uses_sasl,
    )
