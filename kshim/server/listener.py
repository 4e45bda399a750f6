"""The TCP listener: accepts connections (up to ``max.connections``) and serves them."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING

from kshim.broker.broker import Broker
from kshim.broker.lifecycle import BrokerRunner
from kshim.protocol import schema_preload
from kshim.protocol.apis import served_versions
from kshim.server.connection import serve_connection
from kshim.server.request_stream import RequestStream

if TYPE_CHECKING:
    from kshim.server.metrics.service import BrokerMetrics


class ListenError(Exception):
    """The listening address cannot be bound (in use, not local, not resolvable): the
    address, and the system's error as ``cause``."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(f"cannot listen on {host}:{port}")
        self.cause = cause


class KafkaServer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._server: asyncio.Server | None = None
        self._runner = BrokerRunner(broker)
        self._connections: set[asyncio.Task[None]] = set()
        self._max_connections = broker.config.get_int("max.connections")
        self._max_frame_size = broker.config.get_int("socket.request.max.bytes")
        self.metrics: BrokerMetrics | None = None
        self._listener = ""  # host:port bound, the connections' label in the metrics

    async def start(self) -> tuple[str, int]:
        """Starts the broker and listening; returns the bound (host, port)."""
        # Every served version's codec is at hand before the first request: an import
        # mid-run could fail (protocol/schema_preload.py).
        schema_preload.preload(served_versions())
        await self._runner.start()
        host, port = self.broker.config.listen_address()
        try:
            self._server = await asyncio.get_running_loop().create_server(
                lambda: RequestStream(self._max_frame_size, self._accept),
                host,
                port,
                reuse_address=True,
            )
        except OSError as error:
            await self._runner.stop()  # the stores were opened: flush and close them
            raise ListenError(host, port, error) from error
        # No listening line here: the caller reports the address (``kshim serve`` prints
        # it once, with the data directory).
        bound = self._server.sockets[0].getsockname()
        self._listener = f"{bound[0]}:{bound[1]}"
        # Nothing is counted for metrics nobody can scrape (kshim.metrics.listen empty, or
        # its default address taken): requests then pay nothing for them.
        if self.broker.config.metrics_address() is not None:
            # Imported only here: prometheus_client costs about 70 ms and 4.6 MB.
            from kshim.server.metrics.service import BrokerMetrics

            metrics = BrokerMetrics(self.broker, self._connection_counts)
            try:
                served = metrics.start()
            except Exception:
                metrics.stop()
                await self.stop()
                raise
            if served:
                self.metrics = metrics
            else:
                metrics.stop()
        return bound[0], bound[1]

    def _connection_counts(self) -> dict[str, int]:
        return {self._listener: len(self._connections)}

    def _accept(self, stream: RequestStream) -> None:
        transport = stream.transport
        assert transport is not None
        if len(self._connections) >= self._max_connections:
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = asyncio.create_task(self._serve(stream))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, stream: RequestStream) -> None:
        # stop() cancels open connections; that is a normal end, not an error.
        with contextlib.suppress(asyncio.CancelledError):
            observe = None if self.metrics is None else self.metrics.requests.observe
            await serve_connection(stream, self.broker, observe)

    async def stop(self) -> None:
        """Stops accepting, drops open connections, then stops the broker (its background
        jobs, then its stores)."""
        if self.metrics is not None:
            self.metrics.stop()
        if self._server is not None:
            self._server.close()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        await self._runner.stop()
