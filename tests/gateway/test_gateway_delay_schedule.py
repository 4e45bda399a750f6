"""The gateway's delayed delivery without a cluster: the schedule topic's record layout
round-trips, and the in-memory schedule hands records out in due order (ties in offset
order), never before their time, and forgets the ones removed by key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kshim.gateway.delay.entries import (
    BadEntry,
    PendingRecord,
    decode_entry,
    encode_entry,
    entry_key,
    parse_entry_key,
)
from kshim.gateway.delay.schedule import PartitionSchedule

optional_bytes = st.none() | st.binary(max_size=64)
pending_records = st.builds(
    PendingRecord,
    offset=st.integers(0, 2**63 - 1),
    due_ms=st.integers(-(2**63), 2**63 - 1),
    timestamp=st.integers(-1, 2**63 - 1),
    key=optional_bytes,
    value=optional_bytes,
    headers=st.lists(st.tuples(st.text(max_size=20), optional_bytes), max_size=5).map(tuple),
)


@given(pending_records)
def test_a_schedule_entry_round_trips(record: PendingRecord) -> None:
    assert decode_entry(record.offset, encode_entry(record)) == record


def test_a_schedule_key_names_its_partition_and_offset() -> None:
    assert parse_entry_key(entry_key("orders.delay", 3, 17)) == ("orders.delay", 3, 17)
    with pytest.raises(BadEntry):
        parse_entry_key(b"orders.delay")
    with pytest.raises(BadEntry):
        decode_entry(0, encode_entry(PendingRecord(0, 1, 1, b"k", b"v", ()))[:-1])


def _record(offset: int, due_ms: int, key: bytes | None = None) -> PendingRecord:
    return PendingRecord(offset, due_ms, 0, key, b"%d" % offset, ())


def test_due_records_come_in_due_order_and_never_early() -> None:
    schedule = PartitionSchedule()
    for offset, due_ms in [(0, 300), (1, 100), (2, 200), (3, 100)]:
        schedule.add(_record(offset, due_ms))
    assert schedule.take_due(99, 10) == []
    assert [r.offset for r in schedule.take_due(200, 10)] == [1, 3, 2]
    assert schedule.next_due_ms() == 300
    assert [r.offset for r in schedule.take_due(1_000, 1)] == [0]
    assert len(schedule) == 0 and schedule.next_due_ms() is None


def test_records_removed_by_key_are_not_handed_out() -> None:
    schedule = PartitionSchedule()
    schedule.add(_record(0, 100, b"a"))
    schedule.add(_record(1, 50, b"b"))
    schedule.add(_record(2, 150, b"a"))
    for offset in schedule.offsets_with_key(b"a"):
        schedule.remove(offset)
    assert schedule.offsets_with_key(b"a") == []
    assert [r.offset for r in schedule.take_due(1_000, 10)] == [1]
