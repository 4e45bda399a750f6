"""Delayed delivery's durable schedule: due order, coarse buckets split as time comes,
cancel and replace by key, positions and replays, turns and their resumption, counts and
lateness, reopening, crashes and power loss, and topic deletion."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Iterator
from pathlib import Path

import lmdb
import pytest

from kshim.protocol.packed_record import pack_record, unpack_record
from kshim.protocol.records import Header, Record
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys
from kshim.storage.schedule import delay_upkeep
from kshim.storage.schedule.delay_buckets import (
    DAY_MS,
    HOUR_MS,
    LOAD_AHEAD_MS,
    MINUTE_MS,
    WEEK_MS,
    Bucket,
    bucket_for,
    entry_parts,
)
from kshim.storage.schedule.delay_filing import ScheduleChange
from kshim.storage.schedule.delay_records import (
    LATENESS_BOUNDS_MS,
    DelayedRecord,
    ScheduleLayoutError,
    TopicSummary,
    Turn,
)
from kshim.storage.schedule.delay_store import DelayStore

NOW = 1_700_000_040_000  # the start of a minute
TWO_YEARS_MS = 2 * 365 * DAY_MS
ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)
PAYMENTS_0 = TopicPartition("payments", 0)
NO_LATENESS = (0,) * (len(LATENESS_BOUNDS_MS) + 1)
ONE_ON_TIME = (1, *NO_LATENESS[1:])  # one record delivered at most 1 ms late

Pending = tuple[int, TopicPartition, int]


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "delay"


@pytest.fixture
def store(directory: Path) -> Iterator[DelayStore]:
    opened = DelayStore(str(directory))
    yield opened
    opened.close()


def delayed(
    target: TopicPartition,
    offset: int,
    due_ms: int,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: tuple[Header, ...] = (),
) -> DelayedRecord:
    """A record at ``offset`` of ``target``'s delay topic, due at ``due_ms``."""
    packed = pack_record(Record(offset, NOW, key, value, headers))
    return DelayedRecord(due_ms, target, offset, key, packed)


def delay_partition(target: TopicPartition) -> TopicPartition:
    return TopicPartition(f"{target.topic}.delay", target.partition)


def add(record: DelayedRecord) -> ScheduleChange:
    return ScheduleChange(record.source_offset, record.key, False, record.due_ms, record.packed)


def replace(record: DelayedRecord) -> ScheduleChange:
    return ScheduleChange(record.source_offset, record.key, True, record.due_ms, record.packed)


def cancel(offset: int, key: bytes | None) -> ScheduleChange:
    return ScheduleChange(offset, key, True, None, None)


def schedule(store: DelayStore, *records: DelayedRecord, now_ms: int = NOW) -> None:
    """Schedules each record alone, moving its delay partition past it (offset order)."""
    for record in records:
        store.schedule(
            delay_partition(record.target),
            record.target,
            [add(record)],
            record.source_offset + 1,
            now_ms,
        )


def change(store: DelayStore, target: TopicPartition, *changes: ScheduleChange) -> None:
    """Applies ``changes`` to ``target``'s delay partition, moving it past the last."""
    next_position = changes[-1].source_offset + 1
    store.schedule(delay_partition(target), target, list(changes), next_position, NOW)


def settle(store: DelayStore, now_ms: int) -> None:
    """Splits every coarse bucket whose time has come, then loads the minutes falling due."""
    while store.maintain(now_ms):
        pass
    store.maintain(now_ms, split=False)


def take(store: DelayStore, now_ms: int, limit: int = 1 << 20) -> Turn:
    settle(store, now_ms)
    return store.take_due(now_ms, limit)


def finish(store: DelayStore, turn: Turn, now_ms: int) -> None:
    store.finish_turn(turn, now_ms, [now_ms - record.due_ms for record in turn.records])


def deliver(store: DelayStore, now_ms: int, limit: int = 1 << 20) -> list[DelayedRecord]:
    """One turn as the dispatcher takes it: what is due taken, noted, then finished."""
    turn = take(store, now_ms, limit)
    store.begin_turn(turn)
    finish(store, turn, now_ms)
    return turn.records


def run_until_empty(store: DelayStore, now_ms: int) -> list[tuple[int, DelayedRecord]]:
    """Delivers everything, waking when ``next_wake`` says, as the broker does: (delivery
    time, record) in delivery order."""
    delivered: list[tuple[int, DelayedRecord]] = []
    wake = store.next_wake()
    for _ in range(10_000):
        if wake is None:
            return delivered
        now_ms = max(now_ms, wake)
        delivered += [(now_ms, record) for record in deliver(store, now_ms)]
        wake = store.next_wake()
    raise AssertionError("the schedule never ran empty")


def offsets(records: list[DelayedRecord]) -> list[int]:
    return [record.source_offset for record in records]


def pending(store: DelayStore) -> list[Pending]:
    return [(record.due_ms, record.target, record.source_offset) for record in store.peek(1 << 20)]


def counts(store: DelayStore) -> dict[str, int]:
    """Records pending per topic, for the topics with any."""
    return {topic: summary.pending for topic, summary in store.summary().items() if summary.pending}


def bucket_files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory / "buckets"))


def minute_file(at_ms: int) -> str:
    return Bucket(MINUTE_MS, at_ms - at_ms % MINUTE_MS).file_name


def cancellation_entries(store: DelayStore, directory: Path) -> int:
    """How many cancellations the store keeps (closes ``store``: LMDB allows one open
    environment per directory in a process; the store reopens on its next call)."""
    store.close()
    env = lmdb.open(str(directory), max_dbs=8, readonly=True, lock=False)
    try:
        table = env.open_db(lmdb_keys.DELAY_CANCELS_DB, create=False)
        with env.begin(db=table) as txn:
            return int(txn.stat(table)["entries"])
    finally:
        env.close()


# -- a store with nothing scheduled -------------------------------------------------------


def test_fresh_store_reads_as_empty(store: DelayStore) -> None:
    assert not store.exists
    assert store.position(delay_partition(ORDERS_0)) == 0
    assert store.next_wake() is None
    assert store.peek(10) == []
    assert store.summary() == {}
    assert store.resume_turn(NOW) is None
    assert not store.maintain(NOW)
    assert store.take_due(NOW, 10).records == []
    assert not store.turn_under_way


def test_reads_and_forget_topic_do_not_create_the_directory(
    store: DelayStore, directory: Path
) -> None:
    store.position(delay_partition(ORDERS_0))
    store.next_wake()
    store.peek(10)
    store.summary()
    store.resume_turn(NOW)
    store.maintain(NOW)
    store.take_due(NOW, 10)
    store.forget_topic("orders", "orders.delay")
    store.release()
    assert not directory.exists()
    assert not store.exists


def test_readonly_store_of_no_schedule_creates_nothing(directory: Path) -> None:
    reader = DelayStore(str(directory), readonly=True)
    assert reader.summary() == {}
    assert not directory.exists()


def test_first_schedule_creates_the_directory(store: DelayStore, directory: Path) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    assert directory.is_dir()
    assert store.exists
    assert bucket_files(directory) == [minute_file(NOW)]


# -- due order ------------------------------------------------------------------------------


def test_records_are_delivered_in_due_order(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW + 300),
        delayed(ORDERS_0, 1, NOW + 100),
        delayed(ORDERS_0, 2, NOW + 200),
    )
    assert offsets(deliver(store, NOW + 300)) == [1, 2, 0]


def test_ties_are_delivered_in_the_order_they_were_scheduled(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW, key=None) for offset in (3, 7, 250, 256)))
    schedule(store, delayed(ORDERS_1, 0, NOW), delayed(PAYMENTS_0, 5, NOW))
    schedule(store, delayed(ORDERS_0, 257, NOW, key=None))
    delivered = deliver(store, NOW)
    assert [(record.target, record.source_offset) for record in delivered] == [
        (ORDERS_0, 3),
        (ORDERS_0, 7),
        (ORDERS_0, 250),
        (ORDERS_0, 256),
        (ORDERS_1, 0),
        (PAYMENTS_0, 5),
        (ORDERS_0, 257),
    ]


def test_due_order_holds_across_topics_and_partitions(store: DelayStore) -> None:
    schedule(
        store,
        delayed(PAYMENTS_0, 0, NOW + 1),
        delayed(ORDERS_1, 0, NOW + 3),
        delayed(ORDERS_0, 0, NOW + 2),
    )
    delivered = deliver(store, NOW + MINUTE_MS)
    assert [record.target for record in delivered] == [PAYMENTS_0, ORDERS_0, ORDERS_1]


def test_due_order_holds_across_minutes(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW + 2 * MINUTE_MS),
        delayed(ORDERS_0, 1, NOW + 10),
        delayed(ORDERS_0, 2, NOW + MINUTE_MS + 5),
    )
    assert offsets(deliver(store, NOW + 3 * MINUTE_MS)) == [1, 2, 0]


def test_nothing_is_taken_before_its_due_time(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW), delayed(ORDERS_0, 1, NOW + 1))
    assert offsets(deliver(store, NOW - 1)) == []
    assert offsets(deliver(store, NOW)) == [0]
    assert offsets(deliver(store, NOW)) == []
    assert offsets(deliver(store, NOW + 1)) == [1]


def test_minute_ahead_is_not_taken_early_though_loaded(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + MINUTE_MS))
    assert offsets(deliver(store, NOW + MINUTE_MS - LOAD_AHEAD_MS)) == []
    assert offsets(deliver(store, NOW + MINUTE_MS)) == [0]


def test_take_honours_the_limit(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW + offset) for offset in range(5)))
    assert offsets(deliver(store, NOW + 10, limit=2)) == [0, 1]
    assert offsets(deliver(store, NOW + 10, limit=0)) == []
    assert offsets(deliver(store, NOW + 10, limit=2)) == [2, 3]
    assert offsets(deliver(store, NOW + 10)) == [4]


def test_record_due_in_the_past_is_delivered_at_once(store: DelayStore) -> None:
    later = NOW + 5 * MINUTE_MS
    schedule(store, delayed(ORDERS_0, 0, NOW), now_ms=later)
    [record] = deliver(store, later)
    assert (record.due_ms, record.target, record.source_offset) == (NOW, ORDERS_0, 0)


def test_record_due_before_what_was_delivered_is_still_delivered_once(
    store: DelayStore, directory: Path
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 30_000))
    assert offsets(deliver(store, NOW + 30_000)) == [0]
    schedule(store, delayed(ORDERS_0, 1, NOW + 10), now_ms=NOW + 30_000)
    assert offsets(deliver(store, NOW + 30_001)) == [1]
    store.close()
    reopened = DelayStore(str(directory))
    try:
        assert reopened.resume_turn(NOW + 40_000) is None
        assert offsets(deliver(reopened, NOW + 40_000)) == []
        assert counts(reopened) == {}
    finally:
        reopened.close()


def test_taken_records_carry_their_key_seq_and_target(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_1, 4, NOW, key=b"order-7"), delayed(ORDERS_0, 9, NOW))
    first, second = deliver(store, NOW)
    assert (first.due_ms, first.target, first.source_offset, first.key) == (
        NOW,
        ORDERS_1,
        4,
        b"order-7",
    )
    assert first.seq < second.seq


# -- the stored record ----------------------------------------------------------------------


def test_the_packed_record_is_returned_byte_for_byte(store: DelayStore) -> None:
    headers: tuple[Header, ...] = (("trace", b"abc"), ("empty", None))
    record = delayed(ORDERS_0, 9, NOW, key=b"order-1", value=b"payload", headers=headers)
    schedule(store, record)
    [found] = deliver(store, NOW)
    assert found.packed == record.packed
    decoded = unpack_record(found.packed, found.source_offset)
    assert (decoded.offset, decoded.timestamp) == (9, NOW)
    assert (decoded.key, decoded.value, decoded.headers) == (b"order-1", b"payload", headers)


def test_null_value_and_null_key_survive(store: DelayStore) -> None:
    record = delayed(ORDERS_0, 0, NOW, key=None, value=None)
    schedule(store, record)
    [found] = deliver(store, NOW)
    assert (found.key, found.packed) == (None, record.packed)


# -- positions and replays ------------------------------------------------------------------


def test_schedule_moves_the_position(store: DelayStore) -> None:
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, [add(delayed(ORDERS_0, 4, NOW))], 7, NOW)
    assert store.position(delay_partition(ORDERS_0)) == 7
    assert store.position(delay_partition(ORDERS_1)) == 0


def test_schedule_with_no_changes_moves_the_position(store: DelayStore) -> None:
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, [], 12, NOW)
    assert store.position(delay_partition(ORDERS_0)) == 12
    assert pending(store) == []


def test_position_never_moves_back(store: DelayStore) -> None:
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, [], 12, NOW)
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, [], 5, NOW)
    assert store.position(delay_partition(ORDERS_0)) == 12


def test_replaying_the_same_changes_changes_nothing(store: DelayStore) -> None:
    changes = [add(delayed(ORDERS_0, offset, NOW + offset)) for offset in range(3)]
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, changes, 3, NOW)
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, changes, 3, NOW)
    assert pending(store) == [(NOW + offset, ORDERS_0, offset) for offset in range(3)]
    assert counts(store) == {"orders": 3}
    assert store.position(delay_partition(ORDERS_0)) == 3
    assert offsets(deliver(store, NOW + 10)) == [0, 1, 2]


def test_replay_overlapping_the_position_applies_only_new_changes(store: DelayStore) -> None:
    first = [add(delayed(ORDERS_0, offset, NOW)) for offset in range(2)]
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, first, 2, NOW)
    overlapping = [add(delayed(ORDERS_0, offset, NOW)) for offset in range(4)]
    store.schedule(delay_partition(ORDERS_0), ORDERS_0, overlapping, 4, NOW)
    assert offsets(deliver(store, NOW)) == [0, 1, 2, 3]
    assert counts(store) == {}


def test_replayed_cancel_below_the_position_is_skipped(store: DelayStore) -> None:
    old = delayed(ORDERS_0, 0, NOW, key=b"a")
    newer = delayed(ORDERS_0, 2, NOW, key=b"a")
    change(store, ORDERS_0, add(old), replace(delayed(ORDERS_0, 1, NOW, b"a")))
    change(store, ORDERS_0, add(newer))
    # A replay of offset 1 (a replace of key a) must not cancel the record at offset 2.
    store.schedule(
        delay_partition(ORDERS_0), ORDERS_0, [replace(delayed(ORDERS_0, 1, NOW, b"a"))], 2, NOW
    )
    assert [offset for _, _, offset in pending(store)] == [1, 2]
    assert offsets(deliver(store, NOW)) == [1, 2]


def test_positions_are_per_delay_partition(store: DelayStore) -> None:
    schedule(
        store, delayed(ORDERS_0, 4, NOW), delayed(ORDERS_1, 9, NOW), delayed(PAYMENTS_0, 1, NOW)
    )
    assert store.position(delay_partition(ORDERS_0)) == 5
    assert store.position(delay_partition(ORDERS_1)) == 10
    assert store.position(delay_partition(PAYMENTS_0)) == 2


# -- coarse buckets -------------------------------------------------------------------------


def test_records_far_ahead_go_to_coarse_buckets(store: DelayStore, directory: Path) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW + 30 * DAY_MS),
        delayed(ORDERS_0, 1, NOW + 5 * DAY_MS),
        delayed(ORDERS_0, 2, NOW + 5 * HOUR_MS),
        delayed(ORDERS_0, 3, NOW + 30 * MINUTE_MS),
    )
    assert sorted(name[0] for name in bucket_files(directory)) == ["d", "h", "m", "w"]
    assert set(bucket_files(directory)) == {
        bucket_for(NOW + ahead, NOW).file_name
        for ahead in (30 * DAY_MS, 5 * DAY_MS, 5 * HOUR_MS, 30 * MINUTE_MS)
    }


def test_coarse_buckets_are_split_as_time_comes_and_delivered_in_order(
    store: DelayStore, directory: Path
) -> None:
    dues = [
        NOW + TWO_YEARS_MS,
        NOW + 30 * DAY_MS + 7,
        NOW + 30 * DAY_MS,
        NOW + 5 * DAY_MS,
        NOW + 5 * HOUR_MS,
        NOW + 30 * MINUTE_MS,
        NOW + 30 * DAY_MS,
        NOW + 20,
    ]
    records = [
        delayed(ORDERS_0, offset, due, key=b"k%d" % offset, value=b"v" * offset)
        for offset, due in enumerate(dues)
    ]
    schedule(store, *records)
    delivered = run_until_empty(store, NOW)
    expected = sorted(records, key=lambda record: (record.due_ms, record.source_offset))
    assert [record.packed for _, record in delivered] == [record.packed for record in expected]
    assert all(at == record.due_ms for at, record in delivered)
    assert counts(store) == {}
    assert bucket_files(directory) == [minute_file(NOW + TWO_YEARS_MS)]


def test_split_moves_a_coarse_bucket_into_finer_ones(store: DelayStore, directory: Path) -> None:
    due = NOW + 30 * DAY_MS
    schedule(store, delayed(ORDERS_0, 0, due))
    week = bucket_for(due, NOW)
    assert week.width_ms == WEEK_MS
    assert not store.maintain(week.acts_at_ms - 1)
    assert bucket_files(directory) == [week.file_name]
    assert not store.maintain(week.acts_at_ms)
    day = bucket_for(due, week.acts_at_ms)
    assert bucket_files(directory) == [day.file_name]
    assert day.width_ms == DAY_MS
    assert pending(store) == [(due, ORDERS_0, 0)]
    assert counts(store) == {"orders": 1}


def test_split_takes_bounded_steps(
    store: DelayStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delay_upkeep, "SPLIT_BYTES", 300)
    day = bucket_for(NOW + 5 * DAY_MS, NOW)
    records = [delayed(ORDERS_0, offset, day.start_ms + offset * HOUR_MS) for offset in range(12)]
    big = delayed(ORDERS_0, 12, day.start_ms + 13 * HOUR_MS, value=b"x" * 1000)
    schedule(store, *records, big)
    steps = 1
    while store.maintain(day.acts_at_ms):
        steps += 1
        assert sorted(pending(store)) == pending(store)
        assert len(pending(store)) == 13
    assert steps > 3
    assert day.file_name not in bucket_files(directory)
    delivered = run_until_empty(store, day.acts_at_ms)
    assert [record.packed for _, record in delivered] == [r.packed for r in [*records, big]]


def test_split_after_a_long_stop_delivers_everything_due_at_once(store: DelayStore) -> None:
    records = [
        delayed(ORDERS_0, 0, NOW + 3 * WEEK_MS),
        delayed(ORDERS_0, 1, NOW + 5 * DAY_MS),
        delayed(ORDERS_0, 2, NOW + 5 * HOUR_MS),
    ]
    schedule(store, *records)
    late = NOW + 4 * WEEK_MS
    assert offsets(deliver(store, late)) == [2, 1, 0]
    assert counts(store) == {}


def test_a_split_falling_behind_holds_back_later_records_not_the_order(
    store: DelayStore, directory: Path
) -> None:
    hour = NOW - NOW % HOUR_MS + 10 * HOUR_MS
    due = hour + 30 * MINUTE_MS + 10_000
    schedule(store, delayed(ORDERS_0, 0, due), now_ms=due - 3 * HOUR_MS)
    assert bucket_for(due, due - 3 * HOUR_MS).width_ms == HOUR_MS
    schedule(store, delayed(ORDERS_0, 1, due), now_ms=due - 5_000)
    store.maintain(due - 5_000, split=False)
    assert store.take_due(due, 10).records == []  # the hour bucket is not split yet
    assert offsets(deliver(store, due + 1)) == [0, 1]
    store.close()
    restarted = DelayStore(str(directory))
    try:
        assert restarted.resume_turn(due + 1_000) is None
        assert offsets(deliver(restarted, due + 1_000)) == []
    finally:
        restarted.close()


def test_next_wake_is_when_the_first_thing_is_to_be_done(store: DelayStore) -> None:
    far = NOW + 30 * DAY_MS
    schedule(store, delayed(ORDERS_0, 0, far))
    assert store.next_wake() == bucket_for(far, NOW).acts_at_ms
    schedule(store, delayed(ORDERS_0, 1, NOW + MINUTE_MS + 30))
    assert store.next_wake() == NOW + MINUTE_MS - LOAD_AHEAD_MS
    settle(store, NOW + MINUTE_MS - LOAD_AHEAD_MS)
    assert store.next_wake() == NOW + MINUTE_MS + 30


def test_far_due_times_order_after_near_ones(store: DelayStore) -> None:
    far = NOW + TWO_YEARS_MS
    last = (1 << 63) - 1
    schedule(
        store,
        delayed(ORDERS_0, 0, far),
        delayed(ORDERS_0, 1, NOW + 1),
        delayed(ORDERS_0, 2, last),
        delayed(ORDERS_0, 3, far - 1),
        delayed(ORDERS_0, 4, NOW),
    )
    assert [due for due, _, _ in pending(store)] == [NOW, NOW + 1, far - 1, far, last]
    assert offsets(deliver(store, NOW + 1)) == [4, 1]
    assert store.summary()["orders"].next_due_ms == far - 1


# -- peeking --------------------------------------------------------------------------------


def test_peek_leaves_records_in_place(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 5), delayed(PAYMENTS_0, 0, NOW + 30 * DAY_MS))
    assert pending(store) == pending(store)
    assert pending(store) == [(NOW + 5, ORDERS_0, 0), (NOW + 30 * DAY_MS, PAYMENTS_0, 0)]
    assert [record.target for record in store.peek(1)] == [ORDERS_0]


def test_peek_leaves_out_what_was_taken(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW), delayed(ORDERS_0, 1, NOW + 5))
    settle(store, NOW)
    store.take_due(NOW, 10)
    assert pending(store) == [(NOW + 5, ORDERS_0, 1)]


# -- cancel and replace by key ------------------------------------------------------------


def test_cancel_drops_every_earlier_record_of_the_topic_with_the_key(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW, key=b"a"),
        delayed(ORDERS_0, 1, NOW + 5, key=b"a"),
        delayed(ORDERS_1, 0, NOW + 9, key=b"a"),
    )
    change(store, ORDERS_0, cancel(2, b"a"))
    assert pending(store) == []
    turn = take(store, NOW + 10)
    assert turn.records == []
    assert turn.dropped == Counter({"orders": 3})


def test_cancelled_records_count_as_pending_until_dropped(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"), delayed(ORDERS_0, 1, NOW, key=b"b"))
    change(store, ORDERS_0, cancel(2, b"a"))
    assert counts(store) == {"orders": 2}
    assert offsets(deliver(store, NOW)) == [1]
    assert counts(store) == {}


def test_cancel_spares_records_scheduled_after_it(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 5, key=b"a"))
    change(store, ORDERS_0, cancel(1, b"a"))
    schedule(store, delayed(ORDERS_0, 2, NOW, key=b"a"), delayed(ORDERS_1, 0, NOW + 9, key=b"a"))
    assert offsets(deliver(store, NOW + 10)) == [2, 0]


def test_cancel_spares_other_keys_and_other_topics(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW, key=b"a"),
        delayed(ORDERS_0, 1, NOW, key=b"b"),
        delayed(ORDERS_1, 0, NOW, key=None),
        delayed(PAYMENTS_0, 0, NOW, key=b"a"),
    )
    change(store, ORDERS_1, cancel(1, b"a"))
    assert pending(store) == [(NOW, ORDERS_0, 1), (NOW, ORDERS_1, 0), (NOW, PAYMENTS_0, 0)]
    assert [(r.target, r.source_offset) for r in deliver(store, NOW)] == [
        (ORDERS_0, 1),
        (ORDERS_1, 0),
        (PAYMENTS_0, 0),
    ]
    assert counts(store) == {}


def test_cancel_of_an_unknown_key_changes_nothing(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"))
    change(store, ORDERS_0, cancel(1, b"zzz"))
    assert pending(store) == [(NOW, ORDERS_0, 0)]
    assert counts(store) == {"orders": 1}
    assert store.position(delay_partition(ORDERS_0)) == 2


def test_replace_leaves_exactly_the_new_record(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW + 10, key=b"a"),
        delayed(ORDERS_1, 0, NOW + 20, key=b"a"),
        delayed(ORDERS_0, 1, NOW + 30, key=b"b"),
    )
    new = delayed(ORDERS_0, 2, NOW + 40, key=b"a", value=b"new")
    change(store, ORDERS_0, replace(new))
    assert pending(store) == [(NOW + 30, ORDERS_0, 1), (NOW + 40, ORDERS_0, 2)]
    assert counts(store) == {"orders": 4}
    turn = take(store, NOW + 50)
    assert [record.packed for record in turn.records][1] == new.packed
    assert offsets(turn.records) == [1, 2]
    assert turn.dropped == Counter({"orders": 2})
    finish(store, turn, NOW + 50)
    assert counts(store) == {}


def test_replace_spares_other_topics(store: DelayStore) -> None:
    schedule(store, delayed(PAYMENTS_0, 0, NOW, key=b"a"), delayed(ORDERS_0, 0, NOW, key=b"a"))
    change(store, ORDERS_1, replace(delayed(ORDERS_1, 0, NOW + 1, b"a")))
    assert pending(store) == [(NOW, PAYMENTS_0, 0), (NOW + 1, ORDERS_1, 0)]


def test_replaced_record_can_itself_be_replaced(store: DelayStore) -> None:
    for offset in range(3):
        change(store, ORDERS_0, replace(delayed(ORDERS_0, offset, NOW, b"a")))
    assert pending(store) == [(NOW, ORDERS_0, 2)]
    assert offsets(deliver(store, NOW)) == [2]
    assert counts(store) == {}


def test_cancels_and_adds_apply_in_offset_order_within_one_call(store: DelayStore) -> None:
    change(
        store,
        ORDERS_0,
        add(delayed(ORDERS_0, 0, NOW, b"a")),
        add(delayed(ORDERS_0, 1, NOW, b"a")),
        replace(delayed(ORDERS_0, 2, NOW + 1, b"a")),
        add(delayed(ORDERS_0, 3, NOW + 2, b"a")),
    )
    assert pending(store) == [(NOW + 1, ORDERS_0, 2), (NOW + 2, ORDERS_0, 3)]


def test_empty_key_is_a_key_that_can_be_cancelled(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b""), delayed(ORDERS_0, 1, NOW, key=None))
    change(store, ORDERS_0, replace(delayed(ORDERS_0, 2, NOW + 1, b"")))
    assert pending(store) == [(NOW, ORDERS_0, 1), (NOW + 1, ORDERS_0, 2)]


def test_records_without_key_are_never_cancelled(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=None))
    change(store, ORDERS_0, cancel(1, None))
    change(store, ORDERS_0, replace(delayed(ORDERS_0, 2, NOW + 1, None)))
    assert offsets(deliver(store, NOW + 1)) == [0, 2]
    assert counts(store) == {}


def test_new_record_with_a_delivered_key_can_still_be_cancelled(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"))
    assert offsets(deliver(store, NOW)) == [0]
    schedule(store, delayed(ORDERS_0, 1, NOW + 5, key=b"a"))
    change(store, ORDERS_0, replace(delayed(ORDERS_0, 2, NOW + 9, b"a")))
    assert offsets(deliver(store, NOW + 10)) == [2]


def test_cancel_after_records_were_taken_spares_them(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"), delayed(ORDERS_0, 1, NOW + 5, key=b"a"))
    turn = take(store, NOW)
    store.begin_turn(turn)
    change(store, ORDERS_0, cancel(2, b"a"))
    finish(store, turn, NOW)
    assert offsets(turn.records) == [0]
    assert offsets(deliver(store, NOW + 5)) == []
    assert counts(store) == {}


def test_cancellation_in_a_coarse_bucket_is_dropped_at_the_split(store: DelayStore) -> None:
    far = NOW + 30 * DAY_MS
    schedule(store, delayed(ORDERS_0, 0, far, key=b"a"), delayed(ORDERS_0, 1, far, key=b"b"))
    change(store, ORDERS_0, cancel(2, b"a"))
    assert counts(store) == {"orders": 2}
    assert pending(store) == [(far, ORDERS_0, 1)]
    settle(store, bucket_for(far, NOW).acts_at_ms)
    assert counts(store) == {"orders": 1}
    delivered = run_until_empty(store, NOW)
    assert [record.source_offset for _, record in delivered] == [1]
    assert counts(store) == {}


def test_replace_across_bucket_levels_keeps_only_the_new_record(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 30 * DAY_MS, key=b"a"))
    change(store, ORDERS_0, replace(delayed(ORDERS_0, 1, NOW + 10, b"a")))
    change(store, ORDERS_0, replace(delayed(ORDERS_0, 2, NOW + 40 * DAY_MS, b"a")))
    delivered = run_until_empty(store, NOW)
    assert [record.source_offset for _, record in delivered] == [2]
    assert counts(store) == {}


def test_cancellation_is_kept_while_an_older_record_is_pending(
    store: DelayStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delay_upkeep, "PURGE_EVERY_S", 0.0)
    schedule(store, delayed(ORDERS_0, 0, NOW + 5 * HOUR_MS, key=b"a"))
    schedule(store, delayed(ORDERS_1, 0, NOW, key=b"b"))
    change(store, ORDERS_0, cancel(1, b"a"))
    assert offsets(deliver(store, NOW)) == [0]
    for minute in range(1, 4):
        assert deliver(store, NOW + minute * MINUTE_MS) == []
    assert bucket_files(directory) == [bucket_for(NOW + 5 * HOUR_MS, NOW).file_name]
    assert cancellation_entries(store, directory) == 1
    monkeypatch.setattr(delay_upkeep, "PURGE_EVERY_S", 1e9)
    assert run_until_empty(store, NOW) == []
    assert counts(store) == {}


# -- turns ----------------------------------------------------------------------------------


def test_begin_turn_notes_a_turn_under_way(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    turn = take(store, NOW)
    assert not store.turn_under_way
    store.begin_turn(turn)
    assert store.turn_under_way
    finish(store, turn, NOW)
    assert not store.turn_under_way


def test_finish_turn_removes_records_and_counts(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW + offset) for offset in range(3)))
    assert offsets(deliver(store, NOW + 1)) == [0, 1]
    assert pending(store) == [(NOW + 2, ORDERS_0, 2)]
    assert counts(store) == {"orders": 1}


def test_turn_marks_where_delivery_reached_per_minute(store: DelayStore) -> None:
    first = delayed(ORDERS_0, 0, NOW + 5)
    second = delayed(ORDERS_0, 1, NOW + MINUTE_MS + 5)
    schedule(store, first, second)
    turn = take(store, NOW + MINUTE_MS + 5)
    assert turn.marks == {NOW: (first.due_ms, 0), NOW + MINUTE_MS: (second.due_ms, 1)}


def test_resumed_turn_on_a_new_store_gives_the_same_records_once(
    store: DelayStore, directory: Path
) -> None:
    records = [delayed(ORDERS_0, offset, NOW + offset, key=b"%d" % offset) for offset in range(4)]
    schedule(store, *records)
    schedule(store, delayed(PAYMENTS_0, 0, NOW + MINUTE_MS + 1))
    assert offsets(deliver(store, NOW)) == [0]
    turn = take(store, NOW + MINUTE_MS + 1, limit=3)
    turn.from_offsets[ORDERS_0] = 42
    store.begin_turn(turn)
    store.close()
    restarted = DelayStore(str(directory))
    try:
        resumed = restarted.resume_turn(NOW + 2 * MINUTE_MS)
        assert resumed is not None
        assert restarted.turn_under_way
        assert resumed.records == turn.records
        assert resumed.marks == turn.marks
        assert resumed.from_offsets == {ORDERS_0: 42}
        finish(restarted, resumed, NOW + 2 * MINUTE_MS)
        assert not restarted.turn_under_way
        assert pending(restarted) == [(NOW + MINUTE_MS + 1, PAYMENTS_0, 0)]
        assert counts(restarted) == {"payments": 1}
        assert [r.target for r in deliver(restarted, NOW + 2 * MINUTE_MS)] == [PAYMENTS_0]
        assert restarted.resume_turn(NOW + 2 * MINUTE_MS) is None
        assert deliver(restarted, NOW + 3 * MINUTE_MS) == []
    finally:
        restarted.close()


def test_resumed_turn_on_the_same_store_gives_the_same_records(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW + offset) for offset in range(4)))
    turn = take(store, NOW + 3, limit=2)
    store.begin_turn(turn)
    resumed = store.resume_turn(NOW + 5)
    assert resumed is not None
    assert resumed.records == turn.records
    finish(store, resumed, NOW + 5)
    assert offsets(deliver(store, NOW + 5)) == [2, 3]
    assert counts(store) == {}


def test_resumed_turn_counts_the_cancelled_records_it_passed_over(
    store: DelayStore, directory: Path
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"), delayed(ORDERS_0, 1, NOW + 1, key=b"b"))
    change(store, ORDERS_0, cancel(2, b"a"))
    turn = take(store, NOW + 1)
    assert turn.dropped == Counter({"orders": 1})
    store.begin_turn(turn)
    store.close()
    restarted = DelayStore(str(directory))
    try:
        resumed = restarted.resume_turn(NOW + 1)
        assert resumed is not None
        assert offsets(resumed.records) == [1]
        assert resumed.dropped == Counter({"orders": 1})
        finish(restarted, resumed, NOW + 1)
        assert counts(restarted) == {}
    finally:
        restarted.close()


def test_resume_without_a_turn_puts_taken_records_back(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW), delayed(ORDERS_0, 1, NOW + 1))
    assert offsets(take(store, NOW + 1).records) == [0, 1]
    assert store.resume_turn(NOW + 1) is None
    assert offsets(deliver(store, NOW + 1)) == [0, 1]


def test_finish_turn_removes_an_emptied_minute_once_it_is_over(
    store: DelayStore, directory: Path
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 10), delayed(ORDERS_0, 1, NOW + 2 * MINUTE_MS))
    assert offsets(deliver(store, NOW + 10)) == [0]
    assert minute_file(NOW) in bucket_files(directory)
    assert offsets(deliver(store, NOW + 2 * MINUTE_MS)) == [1]
    assert bucket_files(directory) == [minute_file(NOW + 2 * MINUTE_MS)]
    store.close()
    reopened = DelayStore(str(directory))
    try:
        assert reopened.resume_turn(NOW + 3 * MINUTE_MS) is None
        assert deliver(reopened, NOW + 3 * MINUTE_MS) == []
        assert bucket_files(directory) == []
    finally:
        reopened.close()


def test_finish_turn_keeps_a_minute_with_records_left(store: DelayStore, directory: Path) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 10), delayed(ORDERS_0, 1, NOW + 20))
    assert offsets(deliver(store, NOW + MINUTE_MS, limit=1)) == [0]
    assert bucket_files(directory) == [minute_file(NOW)]
    assert offsets(deliver(store, NOW + MINUTE_MS)) == [1]
    assert offsets(deliver(store, NOW + MINUTE_MS)) == []
    assert bucket_files(directory) == []


# -- summary --------------------------------------------------------------------------------


def test_summary_counts_and_first_due_per_topic(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW + 30),
        delayed(ORDERS_1, 0, NOW + 10),
        delayed(ORDERS_1, 1, NOW + 40 * DAY_MS),
        delayed(PAYMENTS_0, 0, NOW + 5 * DAY_MS),
    )
    assert store.summary() == {
        "orders": TopicSummary(3, NOW + 10),
        "payments": TopicSummary(1, NOW + 5 * DAY_MS),
    }


def test_summary_first_due_moves_past_what_was_delivered(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW + offset) for offset in range(3)))
    deliver(store, NOW + 1)
    summary = store.summary()["orders"]
    assert (summary.pending, summary.next_due_ms) == (1, NOW + 2)


def test_summary_keeps_lateness_of_a_topic_with_nothing_pending(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    deliver(store, NOW + 3)
    summary = store.summary()["orders"]
    assert (summary.pending, summary.next_due_ms, summary.delivered) == (0, None, 1)


def test_summary_counts_lateness_per_bucket(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW) for offset in range(4)))
    turn = take(store, NOW)
    store.begin_turn(turn)
    store.finish_turn(turn, NOW + 90_000, [0, 3, 700, 90_000])
    summary = store.summary()["orders"]
    expected = [0] * len(NO_LATENESS)
    for index in (0, 2, LATENESS_BOUNDS_MS.index(1000), len(LATENESS_BOUNDS_MS)):
        expected[index] = 1
    assert summary.lateness_counts == tuple(expected)
    assert summary.delivered == 4
    assert summary.lateness_percentile_ms(0.25) == 1
    assert summary.lateness_percentile_ms(0.5) == 5
    assert summary.lateness_percentile_ms(0.75) == 1000
    assert summary.lateness_percentile_ms(0.99) == -1


def test_lateness_percentile_before_any_delivery_is_none() -> None:
    assert TopicSummary(3, NOW).lateness_percentile_ms(0.5) is None
    assert TopicSummary(3, NOW).lateness_counts == NO_LATENESS


def test_lateness_adds_up_over_turns(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW + offset * MINUTE_MS) for offset in range(3)))
    for offset in range(3):
        deliver(store, NOW + offset * MINUTE_MS)
    summary = store.summary()["orders"]
    assert summary.delivered == 3
    assert summary.lateness_counts[0] == 3


def test_readonly_store_reads_the_summary(store: DelayStore, directory: Path) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 10), delayed(PAYMENTS_0, 0, NOW + 30 * DAY_MS))
    expected = store.summary()
    store.close()
    reader = DelayStore(str(directory), readonly=True)
    try:
        assert reader.summary() == expected
        assert reader.position(delay_partition(ORDERS_0)) == 1
    finally:
        reader.close()


# -- reopening ------------------------------------------------------------------------------


def test_store_survives_reopen(store: DelayStore, directory: Path) -> None:
    records = [
        delayed(ORDERS_0, 3, NOW + 1, key=b"a"),
        delayed(PAYMENTS_0, 8, NOW + 2, key=b"b"),
        delayed(ORDERS_1, 5, NOW + 30 * DAY_MS, key=b"c"),
    ]
    schedule(store, delayed(ORDERS_0, 2, NOW, key=b"z"), *records)
    change(store, ORDERS_0, cancel(4, b"a"))
    deliver(store, NOW)
    store.close()
    reopened = DelayStore(str(directory))
    try:
        assert reopened.exists
        assert pending(reopened) == [(NOW + 2, PAYMENTS_0, 8), (NOW + 30 * DAY_MS, ORDERS_1, 5)]
        assert reopened.position(delay_partition(ORDERS_0)) == 5
        assert reopened.position(delay_partition(PAYMENTS_0)) == 9
        assert reopened.summary() == {
            "orders": TopicSummary(2, NOW + 1, ONE_ON_TIME),
            "payments": TopicSummary(1, NOW + 2),
        }
        delivered = run_until_empty(reopened, NOW)
        assert [record.packed for _, record in delivered] == [r.packed for r in records[1:]]
        assert counts(reopened) == {}
    finally:
        reopened.close()


def test_topic_ids_and_seqs_continue_after_reopen(store: DelayStore, directory: Path) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"))
    store.close()
    reopened = DelayStore(str(directory))
    try:
        schedule(reopened, delayed(PAYMENTS_0, 0, NOW, key=b"a"))
        change(reopened, ORDERS_0, replace(delayed(ORDERS_0, 1, NOW, b"a")))
        delivered = deliver(reopened, NOW)
        assert [(r.target, r.source_offset) for r in delivered] == [(PAYMENTS_0, 0), (ORDERS_0, 1)]
        assert delivered[0].seq > 0
    finally:
        reopened.close()


def test_closed_store_reopens_on_next_call(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW), delayed(ORDERS_0, 1, NOW + 1))
    settle(store, NOW)
    store.close()
    assert store.next_wake() == NOW
    store.release()
    assert offsets(deliver(store, NOW + 1)) == [0, 1]


def test_schedule_of_an_older_layout_is_refused(directory: Path) -> None:
    directory.mkdir()
    env = lmdb.open(str(directory), max_dbs=8)
    env.open_db(b"delay_pending")
    env.close()
    store = DelayStore(str(directory))
    try:
        with pytest.raises(ScheduleLayoutError, match="older kshim"):
            store.position(delay_partition(ORDERS_0))
        with pytest.raises(ScheduleLayoutError):
            schedule(store, delayed(ORDERS_0, 0, NOW))
    finally:
        store.close()


# -- crashes and power loss -----------------------------------------------------------------


def test_crash_between_append_and_commit_loses_nothing_committed(
    store: DelayStore, directory: Path
) -> None:
    records = [delayed(ORDERS_0, offset, NOW + offset) for offset in range(3)]
    schedule(store, *records)
    store.close()
    bucket = directory / "buckets" / minute_file(NOW)
    committed = bucket.stat().st_size
    uncommitted = b"".join(entry_parts(NOW, 99, 0, 0, 99, records[0].packed))
    with bucket.open("ab") as file:
        file.write(uncommitted + uncommitted[:7])
    (directory / "buckets" / minute_file(NOW + MINUTE_MS)).write_bytes(uncommitted)
    reopened = DelayStore(str(directory))
    try:
        assert reopened.resume_turn(NOW) is None
        assert bucket_files(directory) == [minute_file(NOW)]
        assert bucket.stat().st_size == committed
        assert [record.packed for record in deliver(reopened, NOW + 5)] == [
            record.packed for record in records
        ]
        summary = reopened.summary()["orders"]
        assert (summary.pending, summary.next_due_ms, summary.delivered) == (0, None, 3)
    finally:
        reopened.close()


def test_crash_leaves_later_appends_to_the_bucket_readable(
    store: DelayStore, directory: Path
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    store.close()
    bucket = directory / "buckets" / minute_file(NOW)
    with bucket.open("ab") as file:
        file.write(b"\xff" * 13)
    reopened = DelayStore(str(directory))
    try:
        schedule(reopened, delayed(ORDERS_0, 1, NOW + 1))
        assert offsets(deliver(reopened, NOW + 1)) == [0, 1]
    finally:
        reopened.close()


def scheduled_before_power_loss(store: DelayStore) -> list[DelayedRecord]:
    """Schedules records near and far, delivers the first and splits what comes near."""
    records = [
        delayed(ORDERS_0, 0, NOW),
        delayed(ORDERS_0, 1, NOW + 10, key=b"a"),
        delayed(ORDERS_1, 0, NOW + 5 * HOUR_MS),
        delayed(PAYMENTS_0, 0, NOW + 5 * DAY_MS),
        delayed(ORDERS_0, 2, NOW + 30 * DAY_MS, value=b"far"),
    ]
    schedule(store, *records)
    assert offsets(deliver(store, NOW)) == [0]
    settle(store, bucket_for(NOW + 5 * DAY_MS, NOW).acts_at_ms)
    return records


def test_scheduled_records_survive_a_power_loss(directory: Path) -> None:
    filesystem = SimulatedFileSystem()
    store = DelayStore(str(directory), filesystem=filesystem)
    records = scheduled_before_power_loss(store)
    survivor = filesystem.after_power_loss()
    store.close()
    restarted = DelayStore(str(directory), filesystem=survivor)
    try:
        assert restarted.resume_turn(NOW) is None
        delivered = run_until_empty(restarted, NOW)
        assert [record.packed for _, record in delivered] == [r.packed for r in records[1:]]
        assert counts(restarted) == {}
    finally:
        restarted.close()


def test_turn_under_way_survives_a_power_loss(directory: Path) -> None:
    filesystem = SimulatedFileSystem()
    store = DelayStore(str(directory), filesystem=filesystem)
    records = scheduled_before_power_loss(store)
    turn = take(store, NOW + 10)
    store.begin_turn(turn)
    survivor = filesystem.after_power_loss()
    store.close()
    restarted = DelayStore(str(directory), filesystem=survivor)
    try:
        resumed = restarted.resume_turn(NOW + 20)
        assert resumed is not None
        assert [record.packed for record in resumed.records] == [records[1].packed]
        finish(restarted, resumed, NOW + 20)
        delivered = run_until_empty(restarted, NOW + 20)
        assert [record.packed for _, record in delivered] == [r.packed for r in records[2:]]
    finally:
        restarted.close()


# -- forgetting a topic ---------------------------------------------------------------------


def forgotten_orders(store: DelayStore) -> list[DelayedRecord]:
    """Schedules and delivers part of orders and payments, then forgets orders."""
    records = [
        delayed(ORDERS_0, 0, NOW, key=b"a"),
        delayed(ORDERS_1, 0, NOW + 1, key=b"a"),
        delayed(ORDERS_0, 1, NOW + 30 * DAY_MS, key=b"b"),
        delayed(PAYMENTS_0, 0, NOW, key=b"a"),
        delayed(PAYMENTS_0, 1, NOW + 2, key=b"a"),
    ]
    schedule(store, *records)
    deliver(store, NOW)
    store.forget_topic("orders", "orders.delay")
    return records


def test_forget_topic_skips_its_pending_records(store: DelayStore) -> None:
    forgotten_orders(store)
    assert pending(store) == [(NOW + 2, PAYMENTS_0, 1)]
    delivered = run_until_empty(store, NOW)
    assert [(record.target, record.source_offset) for _, record in delivered] == [(PAYMENTS_0, 1)]


def test_forget_topic_removes_its_count_and_lateness(store: DelayStore) -> None:
    forgotten_orders(store)
    assert store.summary() == {"payments": TopicSummary(1, NOW + 2, ONE_ON_TIME)}


def test_forget_topic_removes_its_delay_positions(store: DelayStore) -> None:
    forgotten_orders(store)
    assert store.position(delay_partition(ORDERS_0)) == 0
    assert store.position(delay_partition(ORDERS_1)) == 0
    assert store.position(delay_partition(PAYMENTS_0)) == 2


def test_forget_topic_leaves_other_topics_cancellable(store: DelayStore) -> None:
    forgotten_orders(store)
    change(store, PAYMENTS_0, replace(delayed(PAYMENTS_0, 2, NOW + 3, b"a")))
    delivered = run_until_empty(store, NOW)
    assert [(record.target, record.source_offset) for _, record in delivered] == [(PAYMENTS_0, 2)]


def test_recreated_topic_does_not_see_the_old_records(store: DelayStore, directory: Path) -> None:
    forgotten_orders(store)
    new = delayed(ORDERS_0, 0, NOW + 40 * DAY_MS, key=b"b", value=b"new")
    schedule(store, new)
    assert counts(store) == {"orders": 1, "payments": 1}
    store.close()
    reopened = DelayStore(str(directory))
    try:
        delivered = run_until_empty(reopened, NOW)
        assert [record.packed for _, record in delivered if record.target == ORDERS_0] == [
            new.packed
        ]
        assert counts(reopened) == {}
    finally:
        reopened.close()


def test_forget_topic_while_its_records_are_taken_drops_them_silently(
    store: DelayStore,
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW), delayed(PAYMENTS_0, 0, NOW + 1))
    settle(store, NOW)
    store.forget_topic("orders", "orders.delay")
    turn = take(store, NOW + 1)
    assert [record.target for record in turn.records] == [PAYMENTS_0]
    assert turn.dropped == Counter()


def test_forget_topic_spares_a_topic_whose_name_it_prefixes(store: DelayStore) -> None:
    longer = TopicPartition("orders.delay", 0)
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"), delayed(longer, 0, NOW + 1, key=b"a"))
    store.forget_topic("orders", "orders.delay")
    assert pending(store) == [(NOW + 1, longer, 0)]
    assert counts(store) == {"orders.delay": 1}
    assert store.position(delay_partition(longer)) == 1


# -- sizes ----------------------------------------------------------------------------------


def test_huge_record_key_is_scheduled_replaced_and_delivered(store: DelayStore) -> None:
    key = bytes(range(256)) * 390 + b"x" * 160
    assert len(key) == 100_000
    first = delayed(ORDERS_0, 0, NOW + 30 * DAY_MS, key=key)
    schedule(store, first)
    second = delayed(ORDERS_0, 1, NOW + 1, key=key)
    change(store, ORDERS_0, replace(second))
    delivered = run_until_empty(store, NOW)
    assert [record.packed for _, record in delivered] == [second.packed]
    assert delivered[0][1].key == key


def test_huge_keys_differing_only_at_the_end_are_distinct(store: DelayStore) -> None:
    stem = b"k" * 99_999
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW, key=stem + b"a"),
        delayed(ORDERS_0, 1, NOW, key=stem + b"b"),
    )
    change(store, ORDERS_0, replace(delayed(ORDERS_0, 2, NOW, stem + b"a")))
    assert [offset for _, _, offset in pending(store)] == [1, 2]


def test_longest_topic_name_works(store: DelayStore, directory: Path) -> None:
    target = TopicPartition("t" * 249, 2_000_000)
    record = delayed(target, 1 << 40, NOW, key=b"a")
    schedule(store, record)
    assert pending(store) == [(NOW, target, 1 << 40)]
    assert store.position(delay_partition(target)) == (1 << 40) + 1
    turn = take(store, NOW)
    turn.from_offsets[target] = 3
    store.begin_turn(turn)
    store.close()
    restarted = DelayStore(str(directory))
    try:
        resumed = restarted.resume_turn(NOW)
        assert resumed is not None
        assert resumed.from_offsets == {target: 3}
        assert resumed.records == [record._replace(seq=0)]
        finish(restarted, resumed, NOW)
        restarted.forget_topic(target.topic, delay_partition(target).topic)
        assert restarted.summary() == {}
    finally:
        restarted.close()


# -- known faults ---------------------------------------------------------------------------


def test_spent_cancellation_is_forgotten_and_delivery_goes_on(
    store: DelayStore, directory: Path
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"))
    change(store, ORDERS_0, cancel(1, b"a"))
    schedule(store, delayed(ORDERS_0, 2, NOW + 3 * MINUTE_MS, key=b"b"))
    assert deliver(store, NOW) == []
    assert deliver(store, NOW + MINUTE_MS) == []
    assert bucket_files(directory) == [minute_file(NOW + 3 * MINUTE_MS)]
    store.close()
    restarted = DelayStore(str(directory))
    try:
        assert offsets(deliver(restarted, NOW + 3 * MINUTE_MS)) == [2]
        assert cancellation_entries(restarted, directory) == 0
    finally:
        restarted.close()


def test_record_filed_behind_the_mark_of_an_unloaded_minute_is_delivered(
    store: DelayStore, directory: Path
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 30_000))
    assert offsets(deliver(store, NOW + 30_000)) == [0]
    store.close()
    restarted = DelayStore(str(directory))
    try:
        schedule(restarted, delayed(ORDERS_0, 1, NOW + 10), now_ms=NOW + 30_000)
        assert offsets(deliver(restarted, NOW + 40_000)) == [1]
    finally:
        restarted.close()


class FullDisk(SimulatedFileSystem):
    """Fails the next ``sync_all`` once ``full`` is set, as a full disk would."""

    full = False

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        if self.full:
            self.full = False
            raise OSError(28, "No space left on device")
        super().sync_all(paths, directories)


def test_schedule_retried_after_a_failed_sync_delivers_each_record_once(directory: Path) -> None:
    filesystem = FullDisk()
    store = DelayStore(str(directory), filesystem=filesystem)
    try:
        schedule(store, delayed(ORDERS_0, 0, NOW))
        filesystem.full = True
        with pytest.raises(OSError, match="No space"):
            schedule(store, delayed(ORDERS_0, 1, NOW))
        change(store, ORDERS_0, add(delayed(ORDERS_0, 1, NOW)), add(delayed(ORDERS_0, 2, NOW)))
        assert offsets(deliver(store, NOW)) == [0, 1, 2]
    finally:
        store.close()


def test_topic_first_met_in_a_failed_schedule_keeps_its_records(directory: Path) -> None:
    filesystem = FullDisk()
    filesystem.full = True
    store = DelayStore(str(directory), filesystem=filesystem)
    with pytest.raises(OSError, match="No space"):
        schedule(store, delayed(ORDERS_0, 0, NOW))
    schedule(store, delayed(ORDERS_0, 0, NOW))
    store.close()
    restarted = DelayStore(str(directory), filesystem=filesystem)
    try:
        assert offsets(deliver(restarted, NOW)) == [0]
    finally:
        restarted.close()


def test_a_noted_turn_is_resumed_whole_with_the_clock_stepped_back(
    store: DelayStore, directory: Path
) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW), delayed(ORDERS_0, 1, NOW + 5))
    turn = take(store, NOW + 5, 10)
    store.begin_turn(turn)
    store.close()
    restarted = DelayStore(str(directory))
    try:
        resumed = restarted.resume_turn(NOW - 10 * MINUTE_MS)
        assert resumed is not None
        assert offsets(resumed.records) == [0, 1]
    finally:
        restarted.close()
