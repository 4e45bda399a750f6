"""The pending records of one ``T.delay`` partition, in memory: a heap by due time (ties in
offset order, which is produce order) and an index by key for cancel and replace."""

from __future__ import annotations

import heapq

from kshim.gateway.delay.entries import PendingRecord


class PartitionSchedule:
    """Not thread-safe: one event loop uses it, under its partition's lock."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int]] = []  # (due_ms, offset); removed ones stay, lazily
        self._pending: dict[int, PendingRecord] = {}  # by offset
        self._by_key: dict[bytes, set[int]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, record: PendingRecord) -> None:
        """Files ``record``; one already filed at its offset is replaced."""
        self.remove(record.offset)
        self._pending[record.offset] = record
        heapq.heappush(self._heap, (record.due_ms, record.offset))
        if record.key is not None:
            self._by_key.setdefault(record.key, set()).add(record.offset)

    def remove(self, offset: int) -> PendingRecord | None:
        record = self._pending.pop(offset, None)
        if record is not None and record.key is not None:
            offsets = self._by_key[record.key]
            offsets.discard(offset)
            if not offsets:
                del self._by_key[record.key]
        return record

    def offsets_with_key(self, key: bytes) -> list[int]:
        return sorted(self._by_key.get(key, ()))

    def next_due_ms(self) -> int | None:
        self._drop_removed()
        return self._heap[0][0] if self._heap else None

    def take_due(self, now_ms: int, limit: int) -> list[PendingRecord]:
        """Removes and returns up to ``limit`` records due at ``now_ms`` or before, in due
        order; the caller puts them back with ``add`` if their delivery fails."""
        due: list[PendingRecord] = []
        while len(due) < limit:
            self._drop_removed()
            if not self._heap or self._heap[0][0] > now_ms:
                break
            _, offset = heapq.heappop(self._heap)
            record = self.remove(offset)
            if record is not None:
                due.append(record)
        return due

    def _drop_removed(self) -> None:
        heap, pending = self._heap, self._pending
        while heap:
            due_ms, offset = heap[0]
            record = pending.get(offset)
            if record is not None and record.due_ms == due_ms:
                return
            heapq.heappop(heap)  # removed, or an earlier filing of the same offset
