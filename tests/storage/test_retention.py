"""plan_retention: which leading segments retention and DeleteRecords may drop."""

from __future__ import annotations

from kshim.storage.retention import NO_LIMIT, SegmentSummary, plan_retention

# Three segments of 100 bytes: offsets [0,10) stamped 1000, [10,20) 2000, [20,30) 3000 (active).
SEGMENTS = [
    SegmentSummary(0, 10, 100, 1_000),
    SegmentSummary(10, 20, 100, 2_000),
    SegmentSummary(20, 30, 100, 3_000),
]


def test_nothing_to_drop_without_limits() -> None:
    plan = plan_retention(SEGMENTS, 0, 10_000, NO_LIMIT, NO_LIMIT)
    assert (plan.drop_count, plan.log_start_offset) == (0, 0)


def test_time_retention_drops_segments_whose_newest_batch_expired() -> None:
    plan = plan_retention(SEGMENTS, 0, now_ms=3_500, retention_ms=1_600, retention_bytes=NO_LIMIT)
    assert (plan.drop_count, plan.log_start_offset) == (1, 10)
    plan = plan_retention(SEGMENTS, 0, now_ms=3_500, retention_ms=1_000, retention_bytes=NO_LIMIT)
    assert (plan.drop_count, plan.log_start_offset) == (2, 20)


def test_the_active_segment_is_never_dropped() -> None:
    plan = plan_retention(SEGMENTS, 0, now_ms=10**9, retention_ms=0, retention_bytes=0)
    assert (plan.drop_count, plan.log_start_offset) == (2, 20)


def test_size_retention_keeps_at_least_the_limit() -> None:
    assert plan_retention(SEGMENTS, 0, 0, NO_LIMIT, retention_bytes=250).drop_count == 0
    assert plan_retention(SEGMENTS, 0, 0, NO_LIMIT, retention_bytes=200).drop_count == 1
    assert plan_retention(SEGMENTS, 0, 0, NO_LIMIT, retention_bytes=100).drop_count == 2


def test_segments_below_the_log_start_offset_go() -> None:
    plan = plan_retention(SEGMENTS, log_start_offset=15, now_ms=0, retention_ms=NO_LIMIT,
                          retention_bytes=NO_LIMIT)  # fmt: skip
    assert (plan.drop_count, plan.log_start_offset) == (1, 15)
    plan = plan_retention(SEGMENTS, 20, 0, NO_LIMIT, NO_LIMIT)
    assert (plan.drop_count, plan.log_start_offset) == (2, 20)


def test_only_a_prefix_is_dropped() -> None:
    # The middle segment is expired but the first is not: nothing can go.
    segments = [SegmentSummary(0, 10, 100, 9_000), *SEGMENTS[1:]]
    plan = plan_retention(segments, 0, now_ms=9_500, retention_ms=1_000, retention_bytes=NO_LIMIT)
    assert plan.drop_count == 0
