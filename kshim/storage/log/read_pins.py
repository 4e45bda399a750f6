"""File reads under way, by segment file: what the log cleaner waits out before it deletes.

A read plans its byte range from a segment's index on the event loop, then reads the file
in a worker thread. Once compaction has swapped a cleaned segment in, no new read plans
over the old one, but one planned before may still be about to open its file: the old
file goes only once no read holds a pin on it (disk_compaction.py). Reads sent as file
regions need no pin: a region holds its own descriptor (interface.FileRegion).

Event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator


class ReadPins:
    def __init__(self) -> None:
        self._pins: Counter[str] = Counter()
        self._waiters: list[asyncio.Future[None]] = []

    @contextlib.contextmanager
    def pinned(self, paths: Iterable[str]) -> Iterator[None]:
        """Holds a pin on each of ``paths`` for the block."""
        held = list(paths)
        self._pins.update(held)
        try:
            yield
        finally:
            self._pins.subtract(held)
            if any(self._pins[path] <= 0 for path in held):
                self._pins = +self._pins  # drops the paths no read holds any more
                self._wake()

    def is_pinned(self, path: str) -> bool:
        return self._pins[path] > 0

    async def released(self, paths: Collection[str]) -> None:
        """Returns once no read holds a pin on any of ``paths``."""
        while any(self.is_pinned(path) for path in paths):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
