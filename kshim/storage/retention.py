"""Which old segments a partition may drop: a pure function over a snapshot.

Kafka's rules (LogManager / UnifiedLog.deleteOldSegments): a segment goes
when every batch in it is older than ``retention.ms``, when dropping it keeps
the log at or above ``retention.bytes``, or when it lies wholly below the log
start offset (DeleteRecords). Only a prefix of the log is ever dropped, and
never the active (last) segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NO_LIMIT = -1


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    drop_count: int  # how many of the oldest segments to delete
    log_start_offset: int  # the log start offset once they are gone


def plan_retention(
    segments: Sequence[SegmentSummary],
    log_start_offset: int,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
) -> RetentionPlan:
    """Returns how many leading segments to drop and the resulting log start offset."""
    total = sum(segment.size for segment in segments)
    drop = 0
    for segment in segments[:-1]:
        below_start = segment.next_offset <= log_start_offset
        expired = retention_ms != NO_LIMIT and segment.max_timestamp < now_ms - retention_ms
        oversize = retention_bytes != NO_LIMIT and total - segment.size >= retention_bytes
        if not (below_start or expired or oversize):
            break
        total -= segment.size
        drop += 1
    new_start = log_start_offset
    if drop:
        new_start = max(log_start_offset, segments[drop].base_offset)
    return RetentionPlan(drop, new_start)
