"""When a compaction pass is due and how far it may go: the pure planner (storage/compaction.py)."""

from __future__ import annotations

from dataclasses import replace

from kshim.storage.compaction import (
    CleanableSegment,
    CompactionPolicy,
    group_segments,
    plan_compaction,
)
from kshim.storage.log.offset_map import OffsetMap, capacity_for
from tests.storage.compaction_support import request


def _segments(*sizes: int, sealed: bool = True) -> list[CleanableSegment]:
    """Segments of ten offsets each, stamped 1,000 ms apart; the last is the active one."""
    return [
        CleanableSegment(
            index * 10, index * 10 + 10, size, 1_000 * (index + 1), 1_000 * index + 1, sealed
        )
        for index, size in enumerate(sizes)
    ]


DUE = request(force=False, now_ms=100_000)


def test_a_log_never_cleaned_is_all_dirty() -> None:
    plan = plan_compaction(_segments(100, 100, 100), 0, DUE)
    assert plan is not None
    assert (plan.first_dirty_offset, plan.first_uncleanable_offset, plan.dirty_ratio) == (0, 20, 1)


def test_the_active_segment_alone_is_never_cleanable() -> None:
    assert plan_compaction(_segments(100), 0, replace(DUE, force=True)) is None


def test_the_ratio_must_pass_min_cleanable_dirty_ratio() -> None:
    segments = _segments(100, 100, 100, 100, 50)
    half = replace(DUE, first_dirty_offset=20)  # 2 dirty of 4 cleanable: 0.5, not above
    assert plan_compaction(segments, 0, half) is None
    lower = replace(half, policy=CompactionPolicy(min_cleanable_ratio=0.49))
    plan = plan_compaction(segments, 0, lower)
    assert plan is not None and plan.dirty_ratio == 0.5


def test_the_last_stable_offset_bounds_the_cleanable_segments() -> None:
    plan = plan_compaction(_segments(100, 100, 100, 100), 0, replace(DUE, stable_offset=25))
    assert plan is not None and plan.first_uncleanable_offset == 20
    assert plan_compaction(_segments(100, 100), 0, replace(DUE, stable_offset=5)) is None


def test_unsealed_segments_wait() -> None:
    segments = _segments(100, 100, 100)
    segments[1] = replace(segments[1], sealed=False)
    plan = plan_compaction(segments, 0, DUE)
    assert plan is not None and plan.first_uncleanable_offset == 10


def test_min_compaction_lag_keeps_young_dirty_segments() -> None:
    lagging = replace(DUE, now_ms=3_500, policy=CompactionPolicy(min_lag_ms=1_000))
    plan = plan_compaction(_segments(100, 100, 100, 100), 0, lagging)
    assert plan is not None and plan.first_uncleanable_offset == 20  # the third: max 3,000


def test_max_compaction_lag_forces_a_pass_below_the_ratio() -> None:
    segments = _segments(100, 100, 100, 100)
    clean_mostly = replace(DUE, first_dirty_offset=20, now_ms=50_000)
    assert plan_compaction(segments, 0, clean_mostly) is None  # 1 dirty of 3
    waited = replace(clean_mostly, policy=CompactionPolicy(max_lag_ms=40_000))
    assert plan_compaction(segments, 0, waited) is not None  # its first record: 2,001 ms


def test_a_checkpoint_outside_the_log_restarts_from_the_log_start() -> None:
    segments = _segments(100, 100, 100)
    for checkpoint in (3, 1_000):
        plan = plan_compaction(segments, 5, replace(DUE, first_dirty_offset=checkpoint))
        assert plan is not None and plan.first_dirty_offset == 5


def test_groups_fill_up_to_segment_bytes() -> None:
    assert group_segments([10, 20, 30, 40, 100, 5], 60) == [
        range(3), range(3, 4), range(4, 5), range(5, 6),
    ]  # fmt: skip
    assert group_segments([], 60) == []


def test_the_offset_map_is_bounded_and_stops_when_full() -> None:
    offsets = OffsetMap(2)
    assert offsets.put(b"a", 0) and offsets.put(b"b", 1) and offsets.put(b"a", 2)
    assert not offsets.put(b"c", 3)
    assert (len(offsets), offsets.latest_offset, offsets.get(b"a"), offsets.get(b"c")) == (
        2, 2, 2, -1,
    )  # fmt: skip
    assert capacity_for(128 << 20) > 800_000
    assert capacity_for(1) == 1
