"""The in-memory tail of a partition log: reads, byte limits and eviction."""

from __future__ import annotations

from kshim.storage.log.memtable import Memtable

UNBOUNDED = 1 << 40


def filled(budget_bytes: int, sizes_and_counts: list[tuple[int, int]], base: int = 0) -> Memtable:
    """A memtable holding batches of the given (size, record count), offsets from ``base``."""
    memtable = Memtable(budget_bytes)
    offset = base
    for size, count in sizes_and_counts:
        memtable.append(offset, offset + count, bytes([offset % 256]) * size)
        offset += count
    return memtable


def test_empty_memtable_covers_nothing() -> None:
    memtable = Memtable(100)
    assert memtable.first_offset is None
    assert not memtable.covers(0)


def test_covers_from_the_first_base_to_the_next_offset() -> None:
    memtable = filled(1 << 20, [(10, 3), (10, 2)], base=50)
    assert memtable.first_offset == 50
    assert memtable.next_offset == 55
    assert [memtable.covers(offset) for offset in (49, 50, 54, 55)] == [False, True, True, False]


def test_read_from_a_middle_offset_returns_the_containing_batch() -> None:
    memtable = filled(1 << 20, [(10, 3), (20, 2), (30, 1)])
    chunks, size, end = memtable.read(4, UNBOUNDED, UNBOUNDED)
    assert [len(chunk) for chunk in chunks] == [20, 30]
    assert chunks[0] == bytes([3]) * 20
    assert (size, end) == (50, 6)


def test_read_returns_at_least_one_batch() -> None:
    memtable = filled(1 << 20, [(10, 3), (20, 2)])
    chunks, size, end = memtable.read(0, 1, UNBOUNDED)
    assert (len(chunks), size, end) == (1, 10, 3)


def test_read_stops_at_max_bytes() -> None:
    memtable = filled(1 << 20, [(10, 1), (20, 1), (30, 1)])
    assert memtable.read(0, 30, UNBOUNDED)[1:] == (30, 2)
    assert memtable.read(0, 29, UNBOUNDED)[1:] == (10, 1)
    assert memtable.read(0, 60, UNBOUNDED)[1:] == (60, 3)


def test_read_stops_before_upper_offset() -> None:
    memtable = filled(1 << 20, [(10, 3), (20, 2), (30, 1)])
    assert memtable.read(0, UNBOUNDED, 3)[1:] == (10, 3)
    assert memtable.read(0, UNBOUNDED, 4)[1:] == (30, 5)
    assert memtable.read(0, UNBOUNDED, 6)[1:] == (60, 6)


def test_evict_only_drops_written_batches_while_over_budget() -> None:
    memtable = filled(25, [(10, 1), (10, 1), (10, 1), (10, 1)])
    memtable.evict(written_offset=1)  # only batch 0 is on disk
    assert memtable.first_offset == 1
    memtable.evict(written_offset=4)  # all written: drop until within 25 bytes
    assert memtable.first_offset == 2
    assert memtable.read(2, UNBOUNDED, UNBOUNDED)[1:] == (20, 4)
    assert not memtable.covers(1)


def test_evict_keeps_everything_within_budget() -> None:
    memtable = filled(1 << 20, [(10, 1), (10, 1)])
    memtable.evict(written_offset=2)
    assert memtable.first_offset == 0


def test_evict_a_multi_record_batch_needs_all_of_it_written() -> None:
    memtable = filled(0, [(10, 5), (10, 5)])
    memtable.evict(written_offset=4)  # batch 0 spans 0-4: not fully written
    assert memtable.first_offset == 0
    memtable.evict(written_offset=5)
    assert memtable.first_offset == 5
    memtable.evict(written_offset=10)
    assert memtable.first_offset is None
    assert not memtable.covers(9)


def test_compaction_after_many_evictions_keeps_reads_correct() -> None:
    memtable = filled(0, [(1, 1)] * 3000)
    memtable.evict(written_offset=2500)
    assert memtable.first_offset == 2500
    chunks, size, end = memtable.read(2700, UNBOUNDED, UNBOUNDED)
    assert (len(chunks), size, end) == (300, 300, 3000)
    assert chunks[0] == bytes([2700 % 256])
    memtable.append(3000, 3001, b"new")
    assert memtable.read(3000, UNBOUNDED, UNBOUNDED) == ([b"new"], 3, 3001)
    memtable.evict(written_offset=2999)
    assert memtable.first_offset == 2999


def test_clear_empties_the_table() -> None:
    memtable = filled(1 << 20, [(10, 1), (10, 1)])
    memtable.clear()
    assert memtable.first_offset is None
    assert not memtable.covers(0)
    memtable.append(2, 3, b"x")
    assert memtable.read(2, UNBOUNDED, UNBOUNDED) == ([b"x"], 1, 3)
