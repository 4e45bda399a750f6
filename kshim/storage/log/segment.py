"""One segment of a partition log: a file of raw batches plus its offset index.

The file is ``{base_offset:020d}.log`` (Kafka's naming) and is its own
write-ahead log: batches are stored exactly as they are sent to consumers. A segment the
log cleaner rewrote is ``{base_offset:020d}.{generation}.log``: a name no file had before,
so that the cleaned file can be made durable beside the ones it replaces, and recovery
keeps the newest generation where they overlap (recovery.py, disk_compaction.py).
The index keeps, per batch, its base offset, file position and max timestamp
in compact arrays, so a read finds its batch by binary search and its byte
range without touching the file.
"""

from __future__ import annotations

import bisect
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TypeVar

from kshim.storage.compaction import CleanableSegment
from kshim.storage.interface import LogConfig
from kshim.storage.retention import SegmentSummary

SEGMENT_SUFFIX = ".log"
BASE_OFFSET_DIGITS = 20
NO_END = 1 << 63


def segment_file_name(base_offset: int, generation: int = 0) -> str:
    """``{base_offset:020d}.log``, or ``{base_offset:020d}.{generation}.log`` for a segment
    the log cleaner wrote (generation 1 and up)."""
    if generation == 0:
        return f"{base_offset:020d}{SEGMENT_SUFFIX}"
    return f"{base_offset:020d}.{generation}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> tuple[int, int] | None:
    """(base offset, generation) of a segment file's name, or None for any other file."""
    if not name.endswith(SEGMENT_SUFFIX):
        return None
    stem = name[: -len(SEGMENT_SUFFIX)]
    base, _, generation = stem.partition(".")
    if len(base) != BASE_OFFSET_DIGITS or not base.isdigit():
        return None
    if not generation:
        return int(base), 0
    return (int(base), int(generation)) if generation.isdigit() else None


def segment_generation(path: str) -> int:
    """The generation of a segment file (0 unless the log cleaner wrote it)."""
    parsed = parse_segment_name(os.path.basename(path))
    return 0 if parsed is None else parsed[1]


def should_roll(
    active_size: int, active_created_ms: int, batch_size: int, now_ms: int, config: LogConfig
) -> bool:
    """Whether a batch of ``batch_size`` bytes must start a new segment: Kafka's
    LogSegment.shouldRoll size and age rules (segment.bytes, segment.ms). An empty
    segment never rolls, so a batch larger than segment.bytes gets one of its own."""
    if active_size == 0:
        return False
    too_big = active_size + batch_size > config.segment_bytes
    too_old = now_ms - active_created_ms >= config.segment_ms
    return too_big or too_old


@dataclass(slots=True)
class SegmentCheck:
    """What is known of a recovered segment's bytes below ``unchecked_end`` (bytes at and
    past it were appended by this process, or CRC-checked by recovery's scan)."""

    unchecked_end: int
    checked: list[tuple[int, int]] = field(default_factory=list)  # [start, end), merged
    corrupt: dict[int, str] = field(default_factory=dict)  # batch position -> what is wrong
    reported: bool = False  # the segment's damage was logged

    def needs_check(self, start: int, end: int) -> bool:
        """Whether any of the bytes [start, end) is still to be checked."""
        end = min(end, self.unchecked_end)
        if start >= end:
            return False
        index = bisect.bisect_right(self.checked, (start, NO_END)) - 1
        return index < 0 or self.checked[index][1] < end

    def mark_checked(self, start: int, end: int) -> None:
        """Remembers [start, end) as intact, merged with the ranges it touches (a reader
        going through the segment in order leaves one range)."""
        merged: list[tuple[int, int]] = []
        for low, high in sorted([*self.checked, (start, end)]):
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            elif low < high:
                merged.append((low, high))
        self.checked = merged


@dataclass(slots=True)
class Segment:
    """A segment's index and sizes; file descriptors are owned by the partition log."""

    base_offset: int
    path: str
    created_ms: int
    size: int = 0  # bytes assigned to this segment, written or still pending
    next_offset: int = -1
    batch_offsets: array[int] = field(default_factory=lambda: array("q"))
    batch_positions: array[int] = field(default_factory=lambda: array("q"))
    batch_max_timestamps: array[int] = field(default_factory=lambda: array("q"))
    # The time index: the largest timestamp up to and including each batch. It never
    # decreases, so the first batch stamped at or after T is found by binary search.
    running_max_timestamps: array[int] = field(default_factory=lambda: array("q"))
    max_timestamp: int = -1
    indexed_count: int = 0  # batches whose entries are in the index file (flusher thread only)
    sealed: bool = False  # the index is the memory-mapped sealed index; no more appends
    # Bytes recovery took from disk unchecked, to be checked when first read
    # (segment_check.py); None for a segment this process wrote, or checked whole.
    check: SegmentCheck | None = None

    def __post_init__(self) -> None:
        if self.next_offset < 0:
            self.next_offset = self.base_offset

    def add_batch(self, base_offset: int, size: int, next_offset: int, max_timestamp: int) -> int:
        """Indexes a batch appended at the end; returns its file position."""
        position = self.size
        self.batch_offsets.append(base_offset)
        self.batch_positions.append(position)
        self.batch_max_timestamps.append(max_timestamp)
        self.size += size
        self.next_offset = next_offset
        self.max_timestamp = max(self.max_timestamp, max_timestamp)
        self.running_max_timestamps.append(self.max_timestamp)
        return position

    @property
    def is_empty(self) -> bool:
        return not self.batch_offsets

    def batch_index_for(self, offset: int) -> int:
        """Returns the index of the batch containing ``offset`` (assumes it is in range)."""
        return max(bisect.bisect_right(self.batch_offsets, offset) - 1, 0)

    def batch_end(self, index: int) -> int:
        """Returns the file position just after batch ``index``."""
        if index + 1 < len(self.batch_positions):
            return self.batch_positions[index + 1]
        return self.size

    def byte_range(self, offset: int, max_bytes: int, upper_offset: int) -> tuple[int, int, int]:
        """Plans a read of whole batches from the one containing ``offset``.

        Returns (position, length, offset after the last batch). At least one
        batch is included even if it exceeds ``max_bytes`` (KIP-74); no batch
        at or beyond ``upper_offset`` is included.
        """
        first = self.batch_index_for(offset)
        start = self.batch_positions[first]
        last = first
        count = len(self.batch_offsets)
        while last + 1 < count:
            following = last + 1
            if self.batch_offsets[following] >= upper_offset:
                break
            if self.batch_end(following) - start > max_bytes:
                break
            last = following
        end_offset = self.batch_offsets[last + 1] if last + 1 < count else self.next_offset
        return start, self.batch_end(last) - start, end_offset

    def first_batch_with_timestamp(self, timestamp: int) -> int | None:
        """Returns the index of the first batch whose running max timestamp (the time
        index) is >= ``timestamp``: no earlier batch holds a record stamped that late."""
        index = bisect.bisect_left(self.running_max_timestamps, timestamp)
        return index if index < len(self.running_max_timestamps) else None

    def summary(self) -> SegmentSummary:
        """What retention plans over (``plan_retention``)."""
        return SegmentSummary(self.base_offset, self.next_offset, self.size, self.max_timestamp)

    def cleanable(self, sealed: bool) -> CleanableSegment:
        """What compaction plans over (``plan_compaction``); ``sealed``: whether the store
        may rewrite it."""
        first = self.batch_max_timestamps[0] if len(self.batch_max_timestamps) else -1
        return CleanableSegment(self.base_offset, self.next_offset, self.size,
                                self.max_timestamp, first, sealed)  # fmt: skip


SegmentT = TypeVar("SegmentT", bound=Segment)
_base_offset_of = attrgetter("base_offset")


def segment_holding(segments: Sequence[SegmentT], offset: int) -> SegmentT:
    """The segment holding ``offset``: the last one based at or below it (the first when
    ``offset`` is below them all). ``segments`` are oldest first and never empty."""
    index = bisect.bisect_right(segments, offset, key=_base_offset_of) - 1
    return segments[max(index, 0)]
