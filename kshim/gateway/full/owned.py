"""What the index knows of one source partition it owns, kept in memory so that offsets
and readiness are answered without touching LMDB."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kshim.broker.partition_reads import PartitionOffsets
from kshim.storage.interface import TopicPartition


@dataclass(eq=False, slots=True)
class OwnedPartition:
    """One owned ``T-p``: where its view starts and is applied to, the last stable offset
    it must reach to be ready, and which upstream broker it is read from.

    ``target`` is None until the view has been reset to the partition's log start (then
    ``start``); ``leader`` is None until Metadata named one, and again after its leader
    refused or failed. Touched by the event loop only.
    """

    source: TopicPartition
    start: int = 0
    applied: int = 0
    target: int | None = None
    leader: int | None = None
    released: bool = False
    resumed_at: int | None = None  # where a view kept from before was resumed, if it was
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def offsets(self) -> PartitionOffsets:
        """Log start (where the view was built from), high watermark and last stable
        offset, both the applied position: the view holds committed records only."""
        return PartitionOffsets(min(self.start, self.applied), self.applied, self.applied)

    def ready(self) -> bool:
        return self.target is not None and self.applied >= self.target

    def started(self, start: int, target: int, resumed_at: int | None = None) -> None:
        """The view was reset to ``start``, or kept from a build from ``start`` and applied
        up to ``resumed_at``; it is ready once applied up to ``target``."""
        self.start = start
        self.applied = start if resumed_at is None else resumed_at
        self.resumed_at = resumed_at
        self.target = max(self.applied, target)
        self.wake()

    def advance(self, next_offset: int) -> None:
        if next_offset > self.applied:
            self.applied = next_offset
            self.wake()

    def wake(self) -> None:
        """Wakes every reader waiting for the view to move (or to go)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_beyond(self, offset: int, timeout_s: float) -> None:
        """Returns once the high watermark is past ``offset``, the partition is released,
        or ``timeout_s`` passed."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not self.released and self.applied <= offset:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return
