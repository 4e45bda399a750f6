"""Deadlines for the group coordinator: session expiry, rebalance timeouts, the initial delay.

Kafka keeps these in a timing wheel ("purgatory"); here a heap of deadlines on
the broker's monotonic clock (kshim/broker/clock.py). ``run_due`` fires what is
due and is all a test with a fake clock needs; ``run`` is the background task
that sleeps until the earliest deadline, woken early when an earlier one is
scheduled. Callbacks run on the event loop thread and must not block.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)

Callback = Callable[[], None]


class Timers:
    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, Hashable]] = []
        self._entries: dict[Hashable, tuple[int, int, Callback]] = {}
        self._sequence = itertools.count()
        self._changed = asyncio.Event()

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callback) -> None:
        """Runs ``callback`` at ``deadline_ms``, replacing any timer under ``key``."""
        sequence = next(self._sequence)
        self._entries[key] = (deadline_ms, sequence, callback)
        heapq.heappush(self._heap, (deadline_ms, sequence, key))
        self._changed.set()

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        """The deadline of the timer under ``key``, or None when none is pending."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def next_deadline(self) -> int | None:
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def run_due(self) -> int:
        """Fires every timer whose deadline has passed (including ones they schedule)."""
        fired = 0
        while (deadline := self.next_deadline()) is not None and deadline <= self._clock():
            _, _, key = heapq.heappop(self._heap)
            _, _, callback = self._entries.pop(key)
            fired += 1
            try:
                callback()
            except Exception:
                log.exception("group coordinator timer %r failed", key)
        return fired

    async def run(self) -> None:
        """Fires timers as they fall due, forever; cancel to stop."""
        while True:
            self._changed.clear()
            self.run_due()
            deadline = self.next_deadline()
            timeout_s = None if deadline is None else max(deadline - self._clock(), 0) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout_s)

    def _drop_cancelled(self) -> None:
        while self._heap:
            _, sequence, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == sequence:
                return
            heapq.heappop(self._heap)
