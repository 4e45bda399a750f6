"""Closing connections idle for longer than ``connections.max.idle.ms``, as Kafka's network
layer does (its Selector's idle expiry, default ten minutes): a client that vanished
without closing (a host that died, a NAT that forgot the flow) would otherwise hold its
descriptor and its place under ``max.connections`` for as long as the broker runs.

Idle means nothing read and no answer owed: a long-polling Fetch keeps its connection. A
sweep every tenth of the limit (at most every SWEEP_MAX_S) looks at every connection,
rather than a timer per connection: a read costs one flag store (RequestStream.received)
and an idle connection holds nothing more (tests/server/test_idle_connections.py). A
connection is closed between one limit and one limit plus two sweeps after it went quiet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from kshim.server.connection import Connection

log = logging.getLogger(__name__)
SWEEP_MAX_S = 30.0
SWEEP_MIN_S = 0.01


class IdleConnections:
    """The sweeps over ``connections`` (read anew at each sweep) while started."""

    def __init__(self, limit_ms: int, connections: Callable[[], Iterable[Connection]]) -> None:
        """A negative ``limit_ms`` closes none, as Kafka reads it."""
        self._limit_s = limit_ms / 1000 if limit_ms >= 0 else None
        self._connections = connections
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._limit_s is not None and self._task is None:
            self._task = asyncio.create_task(self._sweep_forever(self._limit_s))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def sweep(self, now: float) -> int:
        """Closes each connection quiet for the limit or longer; returns how many."""
        assert self._limit_s is not None
        closed = 0
        for connection in list(self._connections()):
            if now - connection.quiet_since(now) >= self._limit_s:
                log.debug("closing connection from %s: idle", connection.peer)
                connection.abort()
                closed += 1
        return closed

    async def _sweep_forever(self, limit_s: float) -> None:
        loop = asyncio.get_running_loop()
        interval = min(max(limit_s / 10, SWEEP_MIN_S), SWEEP_MAX_S)
        while True:
            await asyncio.sleep(interval)
            try:
                self.sweep(loop.time())
            except Exception:  # kshim's own fault: the sweeps go on, the broker too
                log.exception("sweeping idle connections failed")
