"""The metrics endpoint, paid for once it is used: its address (``kshim.metrics.listen``)
is bound when the broker starts, so that an address in use fails the start as before, but
what serves it (prometheus_client with the standard library's HTTP and email modules, the
collectors, the server's thread: about 4.4 MB of a fresh broker's 47 and 25 ms of its
start, measured 2026-11-29) is loaded when the first connection to it arrives.

Requests are counted from the start (``requests``: plain integers, request_metrics.py), so
the first scrape reports them all; the group-commit round histograms (service.py) count
from that first connection.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from kshim.broker.config.broker_config import BrokerConfig
from kshim.server.metrics.errors import MetricsUnavailable
from kshim.server.metrics.request_metrics import RequestMetrics

if TYPE_CHECKING:
    from kshim.server.metrics.service import BrokerMetrics

log = logging.getLogger(__name__)
REQUEST_QUEUE_SIZE = 5  # socketserver.TCPServer's
IN_USE_HINT = (
    " (another broker's? set kshim.metrics.listen to another address, or to "
    "nothing to serve no metrics)"
)


class OnDemandMetrics:
    def __init__(self, load: Callable[[RequestMetrics], BrokerMetrics]) -> None:
        """``load``: builds the served metrics over the requests counted so far; called
        on the event loop's thread at the first connection to the endpoint."""
        self._load = load
        self.requests = RequestMetrics()
        self.address: tuple[str, int] | None = None
        self.served: BrokerMetrics | None = None
        self._listening: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, config: BrokerConfig, required: bool = False) -> bool:
        """Binds ``kshim.metrics.listen``; returns whether metrics are served. Raises
        MetricsUnavailable when an address the operator set cannot be bound, or the default
        one when ``required`` (``kshim serve``: a readiness check would otherwise ask
        another broker's endpoint and take its answer for this one's); an embedded broker
        skips a default address in use with a warning. Call on the event loop's thread."""
        address = config.metrics_address()
        if address is None:
            return False
        host, port = address
        try:
            listening = _bind(host, port)
        except OSError as error:
            if "kshim.metrics.listen" in config.explicit:
                raise MetricsUnavailable(host, port, error) from error
            if required:
                raise MetricsUnavailable(host, port, error, IN_USE_HINT) from error
            log.warning(
                "metrics not served: %s:%d: %s (set kshim.metrics.listen to serve "
                "them elsewhere, or to nothing)",
                host,
                port,
                error.strerror,
            )
            return False
        bound = listening.getsockname()
        self.address = (str(bound[0]), int(bound[1]))
        self._listening = listening
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(listening.fileno(), self._first_connection)
        log.info("metrics on http://%s:%d/metrics, readiness on /healthz", *self.address)
        return True

    def _first_connection(self) -> None:
        """Loads what serves the endpoint and hands it the socket, whose waiting
        connection its thread then accepts."""
        listening, self._listening = self._listening, None
        if listening is None or self._loop is None:
            return
        self._loop.remove_reader(listening.fileno())
        try:
            self.served = self._load(self.requests)
            self.served.serve(listening)
        except Exception:  # a broken installation costs the metrics, not the broker
            log.exception("metrics not served: loading them failed")
            listening.close()

    def stop(self) -> None:
        if self._listening is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._listening.fileno())
            self._listening.close()
            self._listening = None
        if self.served is not None:
            self.served.stop()


def _bind(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, as the standard library's HTTP server binds
    one (HTTPServer: SO_REUSEADDR, the system's default for IPv6-only, a backlog of 5)."""
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(REQUEST_QUEUE_SIZE)
    except OSError:
        listening.close()
        raise
    return listening
