"""Which part of a log the cleaner compacts now: a pure function over a snapshot.

Kafka's LogCleanerManager (cleanableOffsets, grabFilthiestCompactedLog): a log of a topic
with ``cleanup.policy=compact`` is clean below its *first dirty offset* (where the last
pass stopped; the log start at first) and dirty above it. The cleaner may rewrite the
segments below the *first uncleanable offset*: never the active segment, nothing at or
past the last stable offset (an open transaction's records may yet be aborted), and no
dirty segment holding a record younger than ``min.compaction.lag.ms``. A pass is due once
the dirty bytes are more than ``min.cleanable.dirty.ratio`` of the cleanable log, or when
a dirty record has waited ``max.compaction.lag.ms``. kshim rounds every bound down to a
segment boundary (Kafka may stop inside the segment holding the last stable offset), and
rewrites only sealed segments: written, durable and indexed (segment_writer.py).

A pass then rewrites every segment from the first up to where its key map ends, a few
segments at a time (``group_segments``: Kafka's groupSegmentsBySize), so small cleaned
segments merge into segments of up to ``segment.bytes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

LONG_MAX = (1 << 63) - 1


class AbortedRange(Protocol):
    """An aborted transaction of one producer: its batches from ``first_offset`` up to its
    ABORT marker at ``last_offset`` (transaction_store.AbortedTransaction)."""

    @property
    def producer_id(self) -> int: ...
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...


def is_aborted_batch(
    producer_id: int, base_offset: int, transactional: bool, aborted: Sequence[AbortedRange]
) -> bool:
    """Whether a read_committed reader skips a batch (and the cleaner removes it): an
    aborted entry covers its producer's transactional batches up to its ABORT marker."""
    if not transactional:
        return False
    return any(
        entry.producer_id == producer_id and entry.first_offset <= base_offset < entry.last_offset
        for entry in aborted
    )


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """A topic's compaction settings (Kafka's topic config names in comments)."""

    min_cleanable_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_lag_ms: int = 0  # min.compaction.lag.ms
    max_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    delete_retention_ms: int = 86_400_000  # delete.retention.ms


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """What a log needs from its broker to compact itself (``PartitionLog.compact``)."""

    policy: CompactionPolicy
    first_dirty_offset: int  # where the last pass stopped (the log start before any)
    stable_offset: int  # nothing at or past it is cleaned: the last stable offset, a view
    now_ms: int
    aborted: Sequence[AbortedRange]  # the partition's aborted transactions
    # The last offset of each idempotent producer's last batch: kept, if need be emptied,
    # so that the producer's sequence survives a restart (Kafka's lastRecordsOfActiveProducers).
    producer_last_offsets: frozenset[int]
    offset_map_capacity: int  # keys the pass may map (offset_map.capacity_for)
    # Compact whatever the dirty ratio, even with nothing dirty (tools and tests: tombstones
    # past their horizon then go; Kafka's cleaner waits for new dirty bytes).
    force: bool = False


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one pass did."""

    first_dirty_offset: int  # the next pass's first dirty offset: the map ended there
    read_bytes: int  # of the segments rewritten or looked at
    written_bytes: int  # of the segments that replaced them
    replaced_segments: int  # old segments swapped out
    new_segments: int  # cleaned segments swapped in
    kept_records: int
    removed_records: int


@dataclass(frozen=True, slots=True)
class CleanableSegment:
    """A segment as compaction plans over it."""

    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    first_timestamp: int  # the first batch's (max) timestamp, -1 when empty
    sealed: bool  # written, durable and indexed: it may be rewritten


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base: nothing from it on is rewritten
    dirty_ratio: float


def plan_compaction(
    segments: Sequence[CleanableSegment],
    log_start_offset: int,
    request: CompactionRequest,
) -> CompactionPlan | None:
    """The range a pass would clean, or None when no pass is due. ``segments`` are oldest
    first, the active one last."""
    first_dirty = _first_dirty(segments, log_start_offset, request.first_dirty_offset)
    upper = _first_uncleanable(segments, first_dirty, request)
    if upper <= segments[0].base_offset:
        return None  # nothing may be rewritten
    first_dirty = min(first_dirty, upper)  # a forced pass may find nothing dirty
    cleanable = [segment for segment in segments if segment.base_offset < upper]
    dirty = [segment for segment in cleanable if segment.next_offset > first_dirty]
    dirty_bytes = sum(segment.size for segment in dirty)
    total_bytes = sum(segment.size for segment in cleanable)
    ratio = dirty_bytes / total_bytes if total_bytes else 0.0
    policy = request.policy
    due = ratio > policy.min_cleanable_ratio or _waited_too_long(dirty, request)
    if not request.force and not (dirty_bytes > 0 and due):
        return None
    return CompactionPlan(first_dirty, upper, ratio)


def _first_dirty(
    segments: Sequence[CleanableSegment], log_start_offset: int, checkpoint: int
) -> int:
    """Kafka resets a checkpoint below the log start, or past the log end, to the log start."""
    start = max(log_start_offset, segments[0].base_offset)
    if checkpoint < start or checkpoint > segments[-1].next_offset:
        return start
    return checkpoint


def _first_uncleanable(
    segments: Sequence[CleanableSegment], first_dirty: int, request: CompactionRequest
) -> int:
    """The base of the first segment that may not be rewritten (the active one at most)."""
    lag_limit = request.now_ms - max(request.policy.min_lag_ms, 0)
    for segment in segments[:-1]:
        dirty = segment.next_offset > first_dirty
        too_young = request.policy.min_lag_ms > 0 and dirty and segment.max_timestamp > lag_limit
        unstable = segment.next_offset > request.stable_offset
        if too_young or unstable or not segment.sealed:
            return segment.base_offset
    return segments[-1].base_offset


def _waited_too_long(dirty: Sequence[CleanableSegment], request: CompactionRequest) -> bool:
    """max.compaction.lag.ms: a dirty segment's first record waited longer than that."""
    if request.policy.max_lag_ms >= LONG_MAX:
        return False
    stamped = [segment.first_timestamp for segment in dirty if segment.first_timestamp > 0]
    return bool(stamped) and min(stamped) < request.now_ms - request.policy.max_lag_ms


def group_segments(sizes: Sequence[int], max_bytes: int) -> list[range]:
    """Consecutive segments (by index) whose sizes add up to at most ``max_bytes``
    (``segment.bytes``), each rewritten into one segment; a segment larger than that is a
    group of its own."""
    groups = []
    start = 0
    while start < len(sizes):
        end = start + 1
        total = sizes[start]
        while end < len(sizes) and total + sizes[end] <= max_bytes:
            total += sizes[end]
            end += 1
        groups.append(range(start, end))
        start = end
    return groups
