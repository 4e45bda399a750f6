"""The delay schedule's buckets: which bucket a record goes to, when a bucket is loaded or
split, and the entries of a bucket file."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.storage.schedule.delay_buckets import (
    DAY_MS,
    ENTRY,
    HOUR_MS,
    LOAD_AHEAD_MS,
    MINUTE_MS,
    WEEK_MS,
    Bucket,
    Entry,
    bucket_for,
    entry_parts,
    iter_entries,
)

# Just after the start of a week (weeks are counted from the epoch, like every width).
NOW = 2_812 * WEEK_MS + 12_345
SECOND_MS = 1000
YEAR_MS = 365 * DAY_MS


def encoded_entry(
    order_ms: int, seq: int, topic_id: int, partition: int, source_offset: int, packed: bytes
) -> bytes:
    return b"".join(entry_parts(order_ms, seq, topic_id, partition, source_offset, packed))


def start_of(width_ms: int, at_ms: int) -> int:
    return at_ms - at_ms % width_ms


# -- levels ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ahead_ms", "width_ms"),
    [
        (0, MINUTE_MS),
        (SECOND_MS, MINUTE_MS),
        (59 * MINUTE_MS, MINUTE_MS),
        (2 * HOUR_MS + 30 * MINUTE_MS, MINUTE_MS),
        (3 * HOUR_MS + 30 * MINUTE_MS, HOUR_MS),
        (47 * HOUR_MS, HOUR_MS),
        (3 * DAY_MS + HOUR_MS, DAY_MS),
        (15 * DAY_MS, DAY_MS),
        (21 * DAY_MS + HOUR_MS, WEEK_MS),
        (2 * YEAR_MS, WEEK_MS),
    ],
)
def test_bucket_width_grows_with_how_far_ahead_a_record_is_due(
    ahead_ms: int, width_ms: int
) -> None:
    assert bucket_for(NOW + ahead_ms, NOW).width_ms == width_ms


def test_week_bucket_only_when_the_week_starts_more_than_14_days_ahead() -> None:
    week = start_of(WEEK_MS, NOW) + 3 * WEEK_MS
    due = week + HOUR_MS
    assert bucket_for(due, week - 14 * DAY_MS - 1) == Bucket(WEEK_MS, week)
    assert bucket_for(due, week - 14 * DAY_MS) == Bucket(DAY_MS, week)


def test_day_bucket_only_when_the_day_starts_more_than_2_days_ahead() -> None:
    day = start_of(DAY_MS, NOW) + 5 * DAY_MS
    due = day + MINUTE_MS
    assert bucket_for(due, day - 2 * DAY_MS - 1) == Bucket(DAY_MS, day)
    assert bucket_for(due, day - 2 * DAY_MS) == Bucket(HOUR_MS, day)


def test_hour_bucket_only_when_the_hour_starts_more_than_2_hours_ahead() -> None:
    hour = start_of(HOUR_MS, NOW) + 5 * HOUR_MS
    due = hour + 10 * SECOND_MS
    assert bucket_for(due, hour - 2 * HOUR_MS - 1) == Bucket(HOUR_MS, hour)
    assert bucket_for(due, hour - 2 * HOUR_MS) == Bucket(MINUTE_MS, hour)


def test_record_due_within_two_hours_goes_to_its_minute() -> None:
    due = NOW + HOUR_MS + 17 * SECOND_MS
    assert bucket_for(due, NOW) == Bucket(MINUTE_MS, start_of(MINUTE_MS, due))


def test_record_due_in_the_past_goes_to_the_current_minute() -> None:
    current = Bucket(MINUTE_MS, start_of(MINUTE_MS, NOW))
    assert bucket_for(NOW - 5 * SECOND_MS, NOW) == current
    assert bucket_for(NOW - 3 * WEEK_MS, NOW) == current
    assert bucket_for(0, NOW) == current


def test_record_due_now_goes_to_the_current_minute() -> None:
    assert bucket_for(NOW, NOW) == Bucket(MINUTE_MS, start_of(MINUTE_MS, NOW))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 * YEAR_MS), st.integers(0, 2 * YEAR_MS))
def test_bucket_is_aligned_and_holds_the_due_time(ahead_ms: int, now_offset_ms: int) -> None:
    now = NOW + now_offset_ms
    due = now + ahead_ms
    bucket = bucket_for(due, now)
    assert bucket.start_ms % bucket.width_ms == 0
    assert bucket.start_ms <= due < bucket.end_ms


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 * YEAR_MS), st.integers(0, 2 * YEAR_MS))
def test_coarse_bucket_is_never_filed_into_once_its_time_to_split_has_come(
    ahead_ms: int, now_offset_ms: int
) -> None:
    now = NOW + now_offset_ms
    bucket = bucket_for(now + ahead_ms, now)
    assert bucket.is_minute or bucket.acts_at_ms > now


# -- splitting ------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(
    st.integers(1, 2 * YEAR_MS),
    st.integers(0, 2 * YEAR_MS),
    st.integers(0, 3 * WEEK_MS),
)
def test_entry_of_a_bucket_due_to_split_is_refiled_into_a_finer_bucket(
    ahead_ms: int, filed_offset_ms: int, late_ms: int
) -> None:
    filed_at = NOW + filed_offset_ms
    due = filed_at + ahead_ms
    bucket = bucket_for(due, filed_at)
    if bucket.is_minute:
        return
    split_at = bucket.acts_at_ms + late_ms
    finer = bucket_for(due, split_at)
    assert finer.width_ms < bucket.width_ms
    if due >= split_at:
        assert bucket.start_ms <= finer.start_ms
        assert finer.end_ms <= bucket.end_ms


def test_split_on_time_refiles_into_the_next_finer_level() -> None:
    week = start_of(WEEK_MS, NOW) + 5 * WEEK_MS
    due = week + 3 * DAY_MS + 5 * HOUR_MS
    assert bucket_for(due, NOW) == Bucket(WEEK_MS, week)
    day = bucket_for(due, Bucket(WEEK_MS, week).acts_at_ms)
    assert day == Bucket(DAY_MS, week + 3 * DAY_MS)
    hour = bucket_for(due, day.acts_at_ms)
    assert hour == Bucket(HOUR_MS, week + 3 * DAY_MS + 5 * HOUR_MS)
    assert bucket_for(due, hour.acts_at_ms) == Bucket(MINUTE_MS, hour.start_ms)


def test_entry_split_after_its_due_time_goes_to_the_current_minute() -> None:
    day = start_of(DAY_MS, NOW) + 5 * DAY_MS
    due = day + HOUR_MS
    late = due + 3 * HOUR_MS + 5 * SECOND_MS
    assert bucket_for(due, NOW) == Bucket(DAY_MS, day)
    assert bucket_for(due, late) == Bucket(MINUTE_MS, start_of(MINUTE_MS, late))


# -- the bucket itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("width_ms", "ahead_ms"),
    [
        (MINUTE_MS, LOAD_AHEAD_MS),
        (HOUR_MS, 2 * HOUR_MS),
        (DAY_MS, 2 * DAY_MS),
        (WEEK_MS, 14 * DAY_MS),
    ],
)
def test_bucket_acts_its_horizon_before_it_starts(width_ms: int, ahead_ms: int) -> None:
    start = start_of(width_ms, NOW) + 10 * width_ms
    assert Bucket(width_ms, start).acts_at_ms == start - ahead_ms


def test_minute_bucket_is_loaded_two_seconds_before_its_minute() -> None:
    assert LOAD_AHEAD_MS == 2 * SECOND_MS
    assert Bucket(MINUTE_MS, 120_000).acts_at_ms == 118_000


@pytest.mark.parametrize(
    ("width_ms", "name"),
    [(MINUTE_MS, "m"), (HOUR_MS, "h"), (DAY_MS, "d"), (WEEK_MS, "w")],
)
def test_bucket_file_name_is_its_level_letter_and_start(width_ms: int, name: str) -> None:
    start = 41 * WEEK_MS
    assert Bucket(width_ms, start).file_name == f"{name}{start}"


def test_bucket_end_and_level() -> None:
    assert Bucket(HOUR_MS, 3 * HOUR_MS).end_ms == 4 * HOUR_MS
    assert Bucket(MINUTE_MS, 0).is_minute
    assert not Bucket(HOUR_MS, 0).is_minute


# -- entries --------------------------------------------------------------------------------

ENTRIES = [
    (NOW, 0, 0, 0, 0, b"first"),
    (NOW + 5, 1, 7, 3, 1 << 40, b""),
    (-(1 << 63), (1 << 63) - 1, -1, (1 << 31) - 1, 12, bytes(range(256)) * 4),
]


def encoded(entries: list[tuple[int, int, int, int, int, bytes]]) -> bytes:
    return b"".join(encoded_entry(*entry) for entry in entries)


def test_entries_read_back_as_written() -> None:
    data = encoded(ENTRIES)
    read = list(iter_entries(data, bucket_start_ms=NOW))
    assert [entry for _, entry in read] == [
        Entry(order, seq, NOW, topic_id, partition, offset, packed)
        for order, seq, topic_id, partition, offset, packed in ENTRIES
    ]


def test_entries_come_with_their_end_positions() -> None:
    ends = [end for end, _ in iter_entries(encoded(ENTRIES))]
    sizes = [ENTRY.size + len(entry[-1]) for entry in ENTRIES]
    assert ends == [sum(sizes[: index + 1]) for index in range(len(sizes))]


def test_entry_is_its_header_then_the_packed_record() -> None:
    data = encoded_entry(NOW, 3, 1, 2, 9, b"packed")
    assert data == ENTRY.pack(NOW, 3, 1, 2, 9, 6) + b"packed"


def test_bucket_start_defaults_to_zero() -> None:
    [(_, entry)] = iter_entries(encoded_entry(NOW, 3, 1, 2, 9, b"x"))
    assert entry.bucket_start_ms == 0


def test_no_entries_in_no_data() -> None:
    assert list(iter_entries(b"")) == []


def test_torn_tail_is_left_out_wherever_it_is_cut() -> None:
    data = encoded(ENTRIES)
    whole = len(encoded(ENTRIES[:-1]))
    for cut in range(whole, len(data)):
        read = [entry.seq for _, entry in iter_entries(data[:cut])]
        assert read == [entry[1] for entry in ENTRIES[:-1]], cut


def test_entries_compare_by_order_then_seq() -> None:
    early = Entry(NOW, 9, 0, 5, 0, 0, b"z")
    tie_first = Entry(NOW + 1, 1, 0, 9, 0, 0, b"z")
    tie_second = Entry(NOW + 1, 2, 0, 0, 0, 0, b"a")
    assert sorted([tie_second, tie_first, early]) == [early, tie_first, tie_second]
