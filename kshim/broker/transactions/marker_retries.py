"""Transactions whose COMMIT or ABORT markers could not all be written yet.

Once a transaction is PrepareCommit or PrepareAbort (durable in LMDB), its outcome is
decided: the producer has its answer, and only the markers are missing. Kafka's
TransactionMarkerChannelManager keeps sending them until every partition has its
marker, and the transaction stays prepared meanwhile, so its producer's next request
gets CONCURRENT_TRANSACTIONS and retries. kshim writes markers itself (marker_writer.py);
when that fails (a storage error, LogFailed), the transactional id is handed to this
queue, and the broker's background job "transaction markers" (kshim/broker/jobs/) retries it
with a bounded exponential backoff until the markers land: Kafka's retry.backoff.ms (100
ms) doubling up to retry.backoff.max.ms (1 s, KIP-580). A restart finds the same
transactions prepared and completes them as well (TransactionCoordinator.load).

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Sleep = Callable[[float], Awaitable[None]]
# Completes one transactional id's markers: True once done (or nothing is left to do).
Complete = Callable[[str], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class MarkerRetrySettings:
    initial_backoff_ms: int = 100  # Kafka's retry.backoff.ms
    max_backoff_ms: int = 1_000  # Kafka's retry.backoff.max.ms (KIP-580)

    def backoffs_ms(self, attempts: int) -> list[int]:
        """The pauses before the first ``attempts`` retries of one failure."""
        pauses, pause = [], self.initial_backoff_ms
        for _ in range(attempts):
            pauses.append(pause)
            pause = min(pause * 2, self.max_backoff_ms)
        return pauses


class MarkerRetries:
    """The transactional ids whose markers wait for a retry, and the loop that retries them."""

    def __init__(self, settings: MarkerRetrySettings, sleep: Sleep = asyncio.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        self._pending: dict[str, None] = {}  # insertion order: oldest failure first
        self._added = asyncio.Event()
        self.attempts = 0  # retries made, successful or not (for tests and metrics)
        self.idle = asyncio.Event()  # set while ``run`` waits for work, nothing pending

    def add(self, transactional_id: str) -> None:
        """Queues ``transactional_id`` for a retry (the caller saw its markers fail)."""
        self._pending[transactional_id] = None
        self._added.set()

    def pending(self) -> list[str]:
        """The transactional ids still waiting, oldest first."""
        return list(self._pending)

    async def run(self, complete: Complete) -> None:
        """Retries every queued id after each pause until none is left, then waits for the
        next; runs until cancelled. ``complete`` reports a failure by returning False,
        never by raising."""
        while True:
            while not self._pending:
                self._added.clear()
                self.idle.set()
                await self._added.wait()
            self.idle.clear()
            pause_ms = self.settings.initial_backoff_ms
            while self._pending:
                await self._sleep(pause_ms / 1000)
                await self._retry_all(complete)
                pause_ms = min(pause_ms * 2, self.settings.max_backoff_ms)

    async def _retry_all(self, complete: Complete) -> None:
        for transactional_id in list(self._pending):
            self.attempts += 1
            if await complete(transactional_id):
                self._pending.pop(transactional_id, None)
