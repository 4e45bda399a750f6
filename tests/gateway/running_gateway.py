"""A gateway run in the test's own process, on an event loop of its own thread, so that a
test can look inside it (its topology, its reviewer's outcomes)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

import uvloop

from kshim.client.security import ClientSecurity
from kshim.gateway.addresses import GatewayPorts
from kshim.gateway.gateway import Gateway
from kshim.gateway.review import GatewayReviewer
from kshim.testing import free_port

TIMEOUT_S = 30.0
UPSTREAM_NODE_ID = 1  # kshim's node id, and that of kshim.jvm's single-node Kafka


class RunningGateway:
    """A Gateway on an event loop of its own thread, relaying to ``upstream``."""

    def __init__(
        self,
        upstream: str,
        loop: str = "asyncio",
        reviewer: GatewayReviewer | None = None,
        upstream_security: ClientSecurity | None = None,
    ) -> None:
        host, port = upstream.rsplit(":", 1)
        self.port = free_port()
        self.ports = GatewayPorts("127.0.0.1", self.port, free_port() - UPSTREAM_NODE_ID)
        self.gateway = Gateway(
            [(host, int(port))], "127.0.0.1", self.ports, reviewer, upstream_security
        )
        self._loop = uvloop.new_event_loop() if loop == "uvloop" else asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._call(self.gateway.start())

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(TIMEOUT_S)

    def stop(self) -> None:
        self._call(self.gateway.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(TIMEOUT_S)
        self._loop.close()
