"""The in-memory tail of a partition log: recent batches, served without disk I/O.

Batches enter on append (before they are durable) and leave, oldest first,
once they are written to their segment and the table is over its byte budget,
which keeps memory flat however long the log grows.
"""

from __future__ import annotations

import bisect


class Memtable:
    def __init__(self, budget_bytes: int) -> None:
        self._budget_bytes = budget_bytes
        self._base_offsets: list[int] = []
        self._batches: list[bytes] = []
        self._head = 0  # index of the oldest live entry; evicted slots are compacted lazily
        self._bytes = 0
        self.next_offset = -1

    def append(self, base_offset: int, next_offset: int, batch: bytes) -> None:
        self._base_offsets.append(base_offset)
        self._batches.append(batch)
        self._bytes += len(batch)
        self.next_offset = next_offset

    @property
    def size(self) -> int:
        """Bytes of the batches held."""
        return self._bytes

    @property
    def first_offset(self) -> int | None:
        """Base offset of the oldest batch held, or None when empty."""
        return self._base_offsets[self._head] if self._head < len(self._base_offsets) else None

    def covers(self, offset: int) -> bool:
        first = self.first_offset
        return first is not None and first <= offset < self.next_offset

    def read(
        self, offset: int, max_bytes: int, upper_offset: int, at_least_one: bool = True
    ) -> tuple[list[bytes], int, int]:
        """Returns (batches, total size, offset after them) starting at the batch holding
        ``offset``; at least one batch unless ``at_least_one`` is False (the read goes on
        from a segment file's), none at or past ``upper_offset``."""
        index = max(bisect.bisect_right(self._base_offsets, offset, lo=self._head) - 1, self._head)
        chunks: list[bytes] = []
        size = 0
        while index < len(self._batches) and self._base_offsets[index] < upper_offset:
            batch = self._batches[index]
            if (chunks or not at_least_one) and size + len(batch) > max_bytes:
                break
            chunks.append(batch)
            size += len(batch)
            index += 1
        end = self._base_offsets[index] if index < len(self._batches) else self.next_offset
        return chunks, size, end

    def evict(self, written_offset: int, budget_bytes: int | None = None) -> int:
        """Drops the oldest batches below ``written_offset`` while over ``budget_bytes``
        (default: the table's own budget); returns the bytes freed."""
        budget = self._budget_bytes if budget_bytes is None else budget_bytes
        before = self._bytes
        while (
            self._bytes > budget
            and self._head < len(self._batches)
            and self._next_base(self._head) <= written_offset
        ):
            self._bytes -= len(self._batches[self._head])
            self._batches[self._head] = b""
            self._head += 1
        if self._head == len(self._batches) or (
            self._head > 1024 and self._head * 2 > len(self._batches)
        ):
            del self._base_offsets[: self._head]
            del self._batches[: self._head]
            self._head = 0
        return before - self._bytes

    def _next_base(self, index: int) -> int:
        following = index + 1
        return (
            self._base_offsets[following]
            if following < len(self._base_offsets)
            else self.next_offset
        )

    def clear(self) -> None:
        self._base_offsets.clear()
        self._batches.clear()
        self._head = 0
        self._bytes = 0
