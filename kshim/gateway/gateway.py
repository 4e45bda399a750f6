"""The gateway's listeners: a bootstrap port, and one port per upstream broker.

A client's connection to the bootstrap port is relayed to the first upstream bootstrap
address that accepts; one to broker ``n``'s port (addresses.py) to that broker's own
address, as the last Metadata answer named it. The cluster is asked for its brokers at
start, and each broker named for the first time in any answer gets its port bound before
that answer reaches the client, so a client never sees an address nothing listens on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import ssl
from collections.abc import Sequence

from kshim.client.sasl import AuthenticationFailed
from kshim.client.security import ClientSecurity
from kshim.client.wire import WireConnection
from kshim.gateway.addresses import GatewayPorts, Topology
from kshim.gateway.answers import HIDDEN, METADATA_KEY, VERSION_CAPS, AnswerRewriter
from kshim.gateway.client_login import ANSWERED_CAPS, GatewayUsers
from kshim.gateway.delay_screen import DelayRules
from kshim.gateway.full.requests import FETCH_KEY, MAX_FETCH_VERSION, VIEWS_HIDDEN
from kshim.gateway.full.service import GatewayViews
from kshim.gateway.local_steps import Served
from kshim.gateway.relay import ClientSide, RelayCounts
from kshim.gateway.review import GatewayReviewer
from kshim.gateway.upstream_login import UpstreamLogin

log = logging.getLogger(__name__)
DISCOVERY_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
BACKLOG = 1024
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # the broker's kshim.ssl.handshake.timeout.ms default


class UpstreamUnavailable(Exception):
    """No upstream bootstrap address answered."""


class Gateway:
    """Relays Kafka clients to the cluster at ``upstream`` (host, port pairs)."""

    def __init__(
        self,
        upstream: Sequence[tuple[str, int]],
        listen_host: str,
        ports: GatewayPorts,
        reviewer: GatewayReviewer | None = None,
        upstream_security: ClientSecurity | None = None,
        client_tls: ssl.SSLContext | None = None,
        delay_rules: DelayRules | None = None,
        views: GatewayViews | None = None,
        users: GatewayUsers | None = None,
    ) -> None:
        """``reviewer``: reviews the cluster's open transactions while the gateway runs.
        ``upstream_security``: how the gateway connects to the cluster (a Kafka client's
        properties): TLS for every connection; SASL for its own (the brokers' discovery),
        while each relayed client authenticates itself, its SASL exchange relayed.
        ``client_tls``: the clients' connections to every gateway port speak TLS
        (server/security/tls.py builds it from a listener's Kafka settings).
        ``delay_rules``: how a Produce to ``T.delay`` is checked (the broker's defaults if
        None). ``views``: ``T.full`` served with the other gateways given views (full/);
        Fetch is then offered up to v12, whose requests name their topics. ``users``: the
        clients' SASL terminated here, with these users (client_login.py); each relaying
        connection then logs in to the cluster as the gateway, where
        ``upstream_security`` has SASL."""
        self.upstream = list(upstream)
        self._delay_rules = DelayRules() if delay_rules is None else delay_rules
        if views is not None:
            self._delay_rules = dataclasses.replace(self._delay_rules, read_only_views=True)
        self.upstream_security = upstream_security
        self._client_tls = client_tls
        self._upstream_tls = None if upstream_security is None else upstream_security.ssl_context()
        self.reviewer = reviewer
        self._reviewing: asyncio.Task[None] | None = None
        self.listen_host = listen_host
        self.ports = ports
        self.topology = Topology()
        self.views = views
        self.users = users
        # Clients log in here; the cluster, where it asks for SASL, sees the gateway's login.
        self._logs_in = bool(users and upstream_security and upstream_security.uses_sasl)
        self._rewriter = self._answer_rewriter()
        self._servers: dict[int | None, asyncio.Server] = {}  # by node id; None: bootstrap
        self._bound_nodes: set[int] = set()
        self._starting: set[asyncio.Task[None]] = set()
        self._clients: set[ClientSide] = set()
        self.counts = RelayCounts()

    def _answer_rewriter(self) -> AnswerRewriter:
        """What rewrites the upstream's answers: brokers' addresses, and the versions
        offered of what the gateway answers itself (the login, the views' Fetch)."""
        caps = dict(VERSION_CAPS)
        if self.users is not None:
            caps.update(ANSWERED_CAPS)
        if self.views is None:
            return AnswerRewriter(self.ports, self.topology, self._broker_seen, None, caps)
        caps[FETCH_KEY] = MAX_FETCH_VERSION
        rewrite = self.views.metadata_rewrite()
        hidden = HIDDEN | VIEWS_HIDDEN
        return AnswerRewriter(self.ports, self.topology, self._broker_seen, rewrite, caps, hidden)

    async def start(self) -> None:
        """Binds the bootstrap port and each upstream broker's. Raises OSError for a port
        that cannot be bound, UpstreamUnavailable."""
        self._servers[None] = await self._serve(self._bound(self.ports.bootstrap_port), None)
        await self.discover()
        if self.views is not None:
            await self.views.start()
        if self.reviewer is not None:
            self._reviewing = asyncio.get_running_loop().create_task(self.reviewer.run())

    async def discover(self) -> None:
        """Asks the cluster for its brokers (Metadata, no topics); binds any new one's port."""
        for host, port in self.upstream:
            try:
                brokers = await asyncio.to_thread(_brokers_of, host, port, self.upstream_security)
            except (OSError, AuthenticationFailed) as error:
                log.debug("upstream %s:%d does not answer: %s", host, port, error)
                continue
            for node_id, broker_host, broker_port in brokers:
                if self.topology.learn(node_id, broker_host, broker_port):
                    self._broker_seen(node_id)
            await self._started()
            return
        raise UpstreamUnavailable(f"no upstream broker answers at {self.describe_upstream()}")

    async def stop(self) -> None:
        if self._reviewing is not None:
            self._reviewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reviewing
        if self.views is not None:
            await self.views.stop()
        await self._started()
        for server in self._servers.values():
            server.close()
        for client in list(self._clients):
            client.abort()
        for server in self._servers.values():
            await server.wait_closed()
        self._servers.clear()

    def _broker_seen(self, node_id: int) -> None:
        """Binds broker ``node_id``'s port at once (the answer naming it goes out next);
        accepting starts on the loop's next turn, the backlog holding who comes first."""
        if node_id in self._bound_nodes:
            return
        self._bound_nodes.add(node_id)
        sock = self._bound(self.ports.port_of(node_id))
        task = asyncio.get_running_loop().create_task(self._accept_on(sock, node_id))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _accept_on(self, sock: socket.socket, node_id: int) -> None:
        self._servers[node_id] = await self._serve(sock, node_id)

    async def _started(self) -> None:
        if self._starting:
            await asyncio.gather(*self._starting)

    def _bound(self, port: int) -> socket.socket:
        sock = socket.create_server((self.listen_host, port), backlog=BACKLOG)
        sock.setblocking(False)
        return sock

    async def _serve(self, sock: socket.socket, node_id: int | None) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        return await loop.create_server(
            lambda: self._accepted(node_id),
            sock=sock,
            ssl=self._client_tls,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if self._client_tls else None,
        )

    def _accepted(self, node_id: int | None) -> ClientSide:
        async def connect(protocol: asyncio.Protocol) -> asyncio.Transport:
            return await self._connect_upstream(node_id, protocol)

        served: Served | None = self.views
        if self.users is not None:
            served = self.users.connection(self.views, lambda: _peer_address(client))
        client = ClientSide(
            connect,
            self._rewriter,
            self._clients.discard,
            self.counts,
            self._delay_rules,
            served,
            self.views is not None,
        )
        self._clients.add(client)
        self.counts.connections += 1
        return client

    async def _connect_upstream(
        self, node_id: int | None, protocol: asyncio.Protocol
    ) -> asyncio.Transport:
        if node_id is None:
            candidates = self.upstream
        else:
            if node_id not in self.topology.brokers:
                await self.discover()
            candidates = [self.topology.brokers[node_id]]
        failure: OSError | None = None
        for host, port in candidates:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    return await self._connected(host, port, protocol)
            except (OSError, TimeoutError) as error:
                failure = OSError(f"{host}:{port}: {error}")
        raise failure or UpstreamUnavailable(self.describe_upstream())

    async def _connected(
        self, host: str, port: int, protocol: asyncio.Protocol
    ) -> asyncio.Transport:
        """A connection to ``host:port`` speaking to ``protocol``, logged in as the gateway
        first where it terminates its clients' SASL (upstream_login.py)."""
        loop = asyncio.get_running_loop()
        tls_name = host if self._upstream_tls is not None else None
        if not self._logs_in:
            transport, _ = await loop.create_connection(
                lambda: protocol, host, port, ssl=self._upstream_tls, server_hostname=tls_name
            )
            return transport
        assert self.upstream_security is not None  # _logs_in says so
        login = UpstreamLogin(self.upstream_security)
        transport, _ = await loop.create_connection(
            lambda: login, host, port, ssl=self._upstream_tls, server_hostname=tls_name
        )
        try:
            await login.finished
        except (AuthenticationFailed, ConnectionError) as error:
            transport.close()
            raise OSError(str(error)) from error
        except BaseException:  # cancelled: the client left meanwhile
            transport.close()
            raise
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        return transport

    @property
    def open_connections(self) -> int:
        return len(self._clients)

    def describe_upstream(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.upstream)


def _peer_address(client: ClientSide) -> str:
    """The client's IP address, as ACLs' host field and Kafka's logs name it."""
    if client.transport is None:
        return ""
    peer = client.transport.get_extra_info("peername")
    return str(peer[0]) if peer else ""


def _brokers_of(
    host: str, port: int, security: ClientSecurity | None
) -> list[tuple[int, str, int]]:
    """The cluster's brokers as ``host:port`` names them (a blocking call: a thread's)."""
    with WireConnection(host, port, DISCOVERY_TIMEOUT_S, security=security) as connection:
        answer = connection.call(METADATA_KEY, 1, {"topics": []})
    return [(broker.node_id, broker.host, broker.port) for broker in answer.brokers]
