"""The in-memory index of one segment (positions, batch lookup, read planning); the roll rule."""

from __future__ import annotations

import pytest

from kshim.storage.interface import LogConfig
from kshim.storage.log.segment import Segment, segment_file_name, should_roll

# (base offset, size in bytes, record count, max timestamp) of four consecutive batches.
BATCHES = [(100, 80, 1, 1000), (101, 120, 4, 1500), (105, 70, 1, 1200), (106, 200, 10, 2000)]


def indexed_segment() -> Segment:
    segment = Segment(100, "/data/t-0/" + segment_file_name(100), created_ms=5)
    for base, size, count, max_timestamp in BATCHES:
        segment.add_batch(base, size, base + count, max_timestamp)
    return segment


def test_segment_file_name_is_twenty_digits() -> None:
    assert segment_file_name(0) == "00000000000000000000.log"
    assert segment_file_name(1234) == "00000000000000001234.log"
    assert segment_file_name(2**63 - 1) == "09223372036854775807.log"


def test_new_segment_is_empty_and_starts_at_its_base() -> None:
    segment = Segment(42, "x.log", created_ms=0)
    assert segment.is_empty
    assert segment.next_offset == 42
    assert segment.size == 0
    assert segment.max_timestamp == -1


def test_add_batch_returns_consecutive_positions() -> None:
    segment = Segment(100, "x.log", created_ms=0)
    positions = [
        segment.add_batch(base, size, base + count, max_timestamp)
        for base, size, count, max_timestamp in BATCHES
    ]
    assert positions == [0, 80, 200, 270]
    assert segment.size == 470
    assert segment.next_offset == 116
    assert segment.max_timestamp == 2000
    assert not segment.is_empty
    assert list(segment.batch_offsets) == [100, 101, 105, 106]
    assert list(segment.batch_max_timestamps) == [1000, 1500, 1200, 2000]


def test_max_timestamp_is_the_maximum_not_the_latest() -> None:
    segment = Segment(0, "x.log", created_ms=0)
    segment.add_batch(0, 10, 1, 900)
    segment.add_batch(1, 10, 2, 100)
    assert segment.max_timestamp == 900


@pytest.mark.parametrize(
    ("offset", "index"),
    [(100, 0), (101, 1), (103, 1), (104, 1), (105, 2), (106, 3), (115, 3)],
)
def test_batch_index_for_finds_the_containing_batch(offset: int, index: int) -> None:
    assert indexed_segment().batch_index_for(offset) == index


def test_batch_end() -> None:
    segment = indexed_segment()
    assert [segment.batch_end(index) for index in range(4)] == [80, 200, 270, 470]


def test_byte_range_reads_everything_when_unbounded() -> None:
    assert indexed_segment().byte_range(100, 1 << 20, 1 << 40) == (0, 470, 116)


def test_byte_range_starts_at_the_batch_holding_a_middle_offset() -> None:
    assert indexed_segment().byte_range(103, 1 << 20, 1 << 40) == (80, 390, 116)


def test_byte_range_includes_one_batch_even_above_max_bytes() -> None:
    assert indexed_segment().byte_range(106, 1, 1 << 40) == (270, 200, 116)
    assert indexed_segment().byte_range(101, 0, 1 << 40) == (80, 120, 105)


def test_byte_range_stops_before_exceeding_max_bytes() -> None:
    segment = indexed_segment()
    # Batches 1 and 2 are 190 bytes together: exactly the limit fits, one byte less does not.
    assert segment.byte_range(101, 190, 1 << 40) == (80, 190, 106)
    assert segment.byte_range(101, 189, 1 << 40) == (80, 120, 105)


def test_byte_range_excludes_batches_at_or_past_upper_offset() -> None:
    segment = indexed_segment()
    assert segment.byte_range(100, 1 << 20, 105) == (0, 200, 105)
    assert segment.byte_range(100, 1 << 20, 106) == (0, 270, 106)
    # A batch that starts below the bound is included whole.
    assert segment.byte_range(100, 1 << 20, 102) == (0, 200, 105)


def test_first_batch_with_timestamp() -> None:
    segment = indexed_segment()
    assert segment.first_batch_with_timestamp(0) == 0
    assert segment.first_batch_with_timestamp(1000) == 0
    assert segment.first_batch_with_timestamp(1001) == 1
    assert segment.first_batch_with_timestamp(1300) == 1
    assert segment.first_batch_with_timestamp(1501) == 3
    assert segment.first_batch_with_timestamp(2001) is None
    assert Segment(0, "x.log", 0).first_batch_with_timestamp(0) is None


ROLL_CONFIG = LogConfig(segment_bytes=1000, segment_ms=60_000)


@pytest.mark.parametrize(
    ("active_size", "batch_size", "age_ms", "rolls"),
    [
        (0, 5000, 10**9, False),  # an empty segment takes any batch, however old or large
        (600, 400, 0, False),  # exactly full
        (600, 401, 0, True),  # one byte over segment.bytes
        (10, 10, 59_999, False),
        (10, 10, 60_000, True),  # segment.ms reached
    ],
)
def test_should_roll(active_size: int, batch_size: int, age_ms: int, rolls: bool) -> None:
    assert should_roll(active_size, 1_000, batch_size, 1_000 + age_ms, ROLL_CONFIG) is rolls
