"""The HTTP side: ``/metrics`` in Prometheus' text format and ``/healthz``, the readiness
answer a container's health check asks for.

Served by the standard library's threaded WSGI server with prometheus_client's WSGI app,
as prometheus_client's own ``start_http_server`` does, in a thread of its own: a slow
scraper never holds the event loop. What a scrape reads of the broker is read on the
event loop's thread (broker_collector.py); ``/healthz`` answers 200 only while the
broker is started and its event loop answers within a second.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, make_server
from wsgiref.types import StartResponse, WSGIEnvironment

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

READY_TIMEOUT_S = 1.0


class _ThreadingWSGIServerV6(ThreadingWSGIServer):
    address_family = socket.AF_INET6  # the standard library's servers bind IPv4 otherwise


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No access log: a scrape every few seconds would fill the broker's log."""


class MetricsEndpoint:
    def __init__(
        self,
        registry: CollectorRegistry,
        loop: asyncio.AbstractEventLoop,
        identity: Callable[[], list[str]] = list,
    ) -> None:
        """``identity``: the ``key=value`` lines ``/healthz`` adds after its first line."""
        self._identity = identity
        self._metrics = make_wsgi_app(registry)
        self._loop = loop
        self.started = False  # set once the broker serves clients
        self._server: ThreadingWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Binds ``host:port`` (port 0: any free one) and serves in a thread; returns the
        bound address. Raises OSError when it cannot be bound."""
        server_class = _ThreadingWSGIServerV6 if ":" in host else ThreadingWSGIServer
        server = make_server(host, port, self._app, server_class, _QuietHandler)
        self._serve(server)
        bound = server.server_address
        return str(bound[0]), int(bound[1])

    def serve(self, listening: socket.socket) -> None:
        """Serves, in a thread, on ``listening``: a socket already bound and listening
        (on_demand.py binds it at start, before anything here is imported)."""
        is_v6 = listening.family == socket.AF_INET6
        server_class = _ThreadingWSGIServerV6 if is_v6 else ThreadingWSGIServer
        host, port = listening.getsockname()[:2]
        server = server_class((host, port), _QuietHandler, bind_and_activate=False)
        server.socket.close()
        server.socket = listening
        # What the standard library's HTTPServer.server_bind sets once it has bound.
        server.server_address = (host, port)
        server.server_name = socket.getfqdn(host)
        server.server_port = port
        server.setup_environ()
        server.server_activate()
        server.set_app(self._app)
        self._serve(server)

    def _serve(self, server: ThreadingWSGIServer) -> None:
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="kshim-metrics", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None

    def _app(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            ready = self._ready()
            lines = ["ready" if ready else "not ready", *self._identity()]
            body = "".join(line + "\n" for line in lines).encode()
            return _answer(start_response, "200 OK" if ready else "503 Service Unavailable", body)
        if path in ("/metrics", "/"):
            answer: Iterable[bytes] = self._metrics(environ, start_response)
            return answer
        return _answer(start_response, "404 Not Found", b"not found: try /metrics or /healthz\n")

    def _ready(self) -> bool:
        """Started, and the event loop runs a coroutine within READY_TIMEOUT_S."""
        if not self.started or self._loop.is_closed():
            return False
        try:
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self._loop).result(READY_TIMEOUT_S)
        except Exception:  # a loop that is stopping, stopped or stuck: not ready
            return False
        return True


def _answer(start_response: StartResponse, status: str, body: bytes) -> list[bytes]:
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]
