"""Delayed delivery's durable schedule: due order, cancel and replace by key, positions,
deliveries under way, counts, reopening and topic deletion."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import lmdb
import pytest

from kshim.protocol.packed_record import pack_record, unpack_record
from kshim.protocol.records import Header, Record
from kshim.storage import lmdb_keys
from kshim.storage.delay_store import (
    DelayedRecord,
    DelayStore,
    Delivery,
    ScheduleChange,
    TopicSummary,
)
from kshim.storage.interface import TopicPartition

NOW = 1_700_000_000_000
FOREVER = (1 << 63) - 1
TWO_YEARS_MS = 2 * 365 * 86400 * 1000
ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)
PAYMENTS_0 = TopicPartition("payments", 0)

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
    return ScheduleChange(record.source_offset, record.key, False, record, record.target.topic)


def replace(record: DelayedRecord) -> ScheduleChange:
    return ScheduleChange(record.source_offset, record.key, True, record, record.target.topic)


def cancel(offset: int, key: bytes | None, topic: str = ORDERS_0.topic) -> ScheduleChange:
    return ScheduleChange(offset, key, True, None, topic)


def schedule(store: DelayStore, *records: DelayedRecord) -> None:
    """Schedules each record alone, moving its delay partition past it (offset order)."""
    for record in records:
        store.schedule(delay_partition(record.target), [add(record)], record.source_offset + 1)


def pending(store: DelayStore) -> list[Pending]:
    return [
        (record.due_ms, record.target, record.source_offset)
        for record in store.due(FOREVER, 1 << 20)
    ]


def counts(store: DelayStore) -> dict[str, int]:
    return {topic: summary.pending for topic, summary in store.summary().items()}


def by_key_entries(store: DelayStore, directory: Path) -> int:
    """How many entries the by-key index holds (closes ``store``: LMDB allows one open
    environment per directory in a process; the store reopens on its next call)."""
    store.close()
    env = lmdb.open(str(directory), max_dbs=5, readonly=True, lock=False)
    try:
        table = env.open_db(lmdb_keys.DELAY_BY_KEY_DB, create=False)
        with env.begin(db=table) as txn:
            return int(txn.stat(table)["entries"])
    finally:
        env.close()


# -- a store with nothing scheduled -------------------------------------------------------


def test_fresh_store_reads_as_empty(store: DelayStore) -> None:
    assert not store.exists
    assert store.position(delay_partition(ORDERS_0)) == 0
    assert store.next_due() is None
    assert store.due(FOREVER, 10) == []
    assert store.summary() == {}
    assert store.deliveries_under_way() == []


def test_reads_and_forget_topic_do_not_create_the_directory(
    store: DelayStore, directory: Path
) -> None:
    store.position(delay_partition(ORDERS_0))
    store.next_due()
    store.due(FOREVER, 10)
    store.summary()
    store.deliveries_under_way()
    store.forget_topic("orders", "orders.delay")
    assert not directory.exists()
    assert not store.exists


def test_first_schedule_creates_the_directory(store: DelayStore, directory: Path) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    assert directory.is_dir()
    assert store.exists


# -- due order ------------------------------------------------------------------------------


def test_due_returns_records_in_due_order(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW + 300),
        delayed(ORDERS_0, 1, NOW + 100),
        delayed(ORDERS_0, 2, NOW + 200),
    )
    assert pending(store) == [
        (NOW + 100, ORDERS_0, 1),
        (NOW + 200, ORDERS_0, 2),
        (NOW + 300, ORDERS_0, 0),
    ]


def test_due_orders_ties_by_delay_offset(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW, key=None) for offset in (3, 7, 250, 256)))
    assert [record.source_offset for record in store.due(NOW, 10)] == [3, 7, 250, 256]


def test_due_orders_across_topics_and_partitions_by_due_time(store: DelayStore) -> None:
    schedule(
        store,
        delayed(PAYMENTS_0, 0, NOW + 1),
        delayed(ORDERS_1, 0, NOW + 3),
        delayed(ORDERS_0, 0, NOW + 2),
    )
    assert [record.target for record in store.due(FOREVER, 10)] == [PAYMENTS_0, ORDERS_0, ORDERS_1]


def test_due_leaves_records_due_after_now(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW), delayed(ORDERS_0, 1, NOW + 1))
    assert [record.source_offset for record in store.due(NOW, 10)] == [0]
    assert [record.source_offset for record in store.due(NOW - 1, 10)] == []


def test_due_honours_limit(store: DelayStore) -> None:
    schedule(store, *(delayed(ORDERS_0, offset, NOW + offset) for offset in range(5)))
    assert [record.source_offset for record in store.due(FOREVER, 2)] == [0, 1]
    assert store.due(FOREVER, 0) == []


def test_due_does_not_remove_records(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    store.due(NOW, 10)
    assert pending(store) == [(NOW, ORDERS_0, 0)]


def test_next_due_is_the_first_due_time(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW + 50), delayed(PAYMENTS_0, 0, NOW + 20))
    assert store.next_due() == NOW + 20


def test_due_record_carries_its_pending_key(store: DelayStore) -> None:
    record = delayed(ORDERS_1, 4, NOW)
    schedule(store, record)
    [found] = store.due(NOW, 1)
    assert found.pending_key == record.pending_key
    assert (found.due_ms, found.target, found.source_offset) == (NOW, ORDERS_1, 4)


# -- the stored record ----------------------------------------------------------------------


def test_the_packed_record_is_returned_byte_for_byte(store: DelayStore) -> None:
    headers: tuple[Header, ...] = (("trace", b"abc"), ("empty", None))
    record = delayed(ORDERS_0, 9, NOW, key=b"order-1", value=b"payload", headers=headers)
    schedule(store, record)
    [found] = store.due(NOW, 1)
    assert found.packed == record.packed
    decoded = unpack_record(found.packed, found.source_offset)
    assert (decoded.offset, decoded.timestamp) == (9, NOW)
    assert (decoded.key, decoded.value, decoded.headers) == (b"order-1", b"payload", headers)


# -- positions and replays ------------------------------------------------------------------


def test_schedule_moves_the_position(store: DelayStore) -> None:
    store.schedule(delay_partition(ORDERS_0), [add(delayed(ORDERS_0, 4, NOW))], 7)
    assert store.position(delay_partition(ORDERS_0)) == 7
    assert store.position(delay_partition(ORDERS_1)) == 0


def test_schedule_with_no_changes_moves_the_position(store: DelayStore) -> None:
    store.schedule(delay_partition(ORDERS_0), [], 12)
    assert store.position(delay_partition(ORDERS_0)) == 12
    assert pending(store) == []


def test_position_never_moves_back(store: DelayStore) -> None:
    store.schedule(delay_partition(ORDERS_0), [], 12)
    store.schedule(delay_partition(ORDERS_0), [], 5)
    assert store.position(delay_partition(ORDERS_0)) == 12


def test_replaying_the_same_changes_changes_nothing(store: DelayStore) -> None:
    changes = [add(delayed(ORDERS_0, offset, NOW + offset)) for offset in range(3)]
    store.schedule(delay_partition(ORDERS_0), changes, 3)
    store.schedule(delay_partition(ORDERS_0), changes, 3)
    assert pending(store) == [(NOW + offset, ORDERS_0, offset) for offset in range(3)]
    assert counts(store) == {"orders": 3}
    assert store.position(delay_partition(ORDERS_0)) == 3


def test_replay_overlapping_the_position_applies_only_new_changes(store: DelayStore) -> None:
    first = [add(delayed(ORDERS_0, offset, NOW)) for offset in range(2)]
    store.schedule(delay_partition(ORDERS_0), first, 2)
    overlapping = [add(delayed(ORDERS_0, offset, NOW)) for offset in range(4)]
    store.schedule(delay_partition(ORDERS_0), overlapping, 4)
    assert [offset for _, _, offset in pending(store)] == [0, 1, 2, 3]
    assert counts(store) == {"orders": 4}


def test_replayed_cancel_below_the_position_is_skipped(store: DelayStore) -> None:
    old = delayed(ORDERS_0, 0, NOW, key=b"a")
    newer = delayed(ORDERS_0, 2, NOW, key=b"a")
    store.schedule(
        delay_partition(ORDERS_0), [add(old), replace(delayed(ORDERS_0, 1, NOW, b"a"))], 2
    )
    store.schedule(delay_partition(ORDERS_0), [add(newer)], 3)
    # A replay of offset 1 (a replace of key a) must not cancel the record at offset 2.
    store.schedule(delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, 1, NOW, b"a"))], 2)
    assert [offset for _, _, offset in pending(store)] == [1, 2]
    assert counts(store) == {"orders": 2}


def test_positions_are_per_delay_partition(store: DelayStore) -> None:
    schedule(
        store, delayed(ORDERS_0, 4, NOW), delayed(ORDERS_1, 9, NOW), delayed(PAYMENTS_0, 1, NOW)
    )
    assert store.position(delay_partition(ORDERS_0)) == 5
    assert store.position(delay_partition(ORDERS_1)) == 10
    assert store.position(delay_partition(PAYMENTS_0)) == 2


# -- cancel and replace by key ------------------------------------------------------------


def test_cancel_removes_every_record_of_the_topic_with_the_key(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW, key=b"a"),
        delayed(ORDERS_0, 1, NOW + 5, key=b"a"),
        delayed(ORDERS_1, 0, NOW + 9, key=b"a"),
    )
    store.schedule(delay_partition(ORDERS_0), [cancel(2, b"a")], 3)
    assert pending(store) == []
    assert store.summary() == {}


def test_cancel_spares_other_keys_and_other_topics(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW, key=b"a"),
        delayed(ORDERS_0, 1, NOW, key=b"b"),
        delayed(ORDERS_1, 0, NOW, key=None),
        delayed(PAYMENTS_0, 0, NOW, key=b"a"),
    )
    store.schedule(delay_partition(ORDERS_1), [cancel(1, b"a")], 2)
    assert pending(store) == [(NOW, ORDERS_0, 1), (NOW, ORDERS_1, 0), (NOW, PAYMENTS_0, 0)]
    assert counts(store) == {"orders": 2, "payments": 1}


def test_cancel_of_an_unknown_key_changes_nothing(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"))
    store.schedule(delay_partition(ORDERS_0), [cancel(1, b"zzz")], 2)
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
    store.schedule(delay_partition(ORDERS_0), [replace(new)], 3)
    assert pending(store) == [(NOW + 30, ORDERS_0, 1), (NOW + 40, ORDERS_0, 2)]
    assert store.due(FOREVER, 10)[1].packed == new.packed
    assert counts(store) == {"orders": 2}


def test_replace_spares_other_topics(store: DelayStore) -> None:
    schedule(store, delayed(PAYMENTS_0, 0, NOW, key=b"a"), delayed(ORDERS_0, 0, NOW, key=b"a"))
    store.schedule(delay_partition(ORDERS_1), [replace(delayed(ORDERS_1, 0, NOW + 1, b"a"))], 1)
    assert pending(store) == [(NOW, PAYMENTS_0, 0), (NOW + 1, ORDERS_1, 0)]
    assert counts(store) == {"orders": 1, "payments": 1}


def test_replaced_record_can_itself_be_replaced(store: DelayStore) -> None:
    for offset in range(3):
        store.schedule(
            delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, offset, NOW, b"a"))], offset + 1
        )
    assert pending(store) == [(NOW, ORDERS_0, 2)]
    assert counts(store) == {"orders": 1}


def test_cancels_and_adds_apply_in_offset_order_within_one_call(store: DelayStore) -> None:
    changes = [
        add(delayed(ORDERS_0, 0, NOW, b"a")),
        add(delayed(ORDERS_0, 1, NOW, b"a")),
        replace(delayed(ORDERS_0, 2, NOW + 1, b"a")),
        add(delayed(ORDERS_0, 3, NOW + 2, b"a")),
    ]
    store.schedule(delay_partition(ORDERS_0), changes, 4)
    assert pending(store) == [(NOW + 1, ORDERS_0, 2), (NOW + 2, ORDERS_0, 3)]
    assert counts(store) == {"orders": 2}


def test_empty_key_is_a_key_that_can_be_cancelled(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b""), delayed(ORDERS_0, 1, NOW, key=None))
    store.schedule(delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, 2, NOW + 1, b""))], 3)
    assert pending(store) == [(NOW, ORDERS_0, 1), (NOW + 1, ORDERS_0, 2)]


# -- records without a key ------------------------------------------------------------------


def test_records_without_key_are_scheduled_and_due(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=None), delayed(ORDERS_0, 1, NOW, key=None))
    assert pending(store) == [(NOW, ORDERS_0, 0), (NOW, ORDERS_0, 1)]
    assert counts(store) == {"orders": 2}


def test_records_without_key_are_never_cancelled(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=None))
    store.schedule(delay_partition(ORDERS_0), [cancel(1, None)], 2)
    store.schedule(delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, 2, NOW + 1, None))], 3)
    assert pending(store) == [(NOW, ORDERS_0, 0), (NOW + 1, ORDERS_0, 2)]
    assert counts(store) == {"orders": 2}


def test_records_without_key_are_delivered(store: DelayStore) -> None:
    record = delayed(ORDERS_0, 0, NOW, key=None)
    schedule(store, record)
    store.begin_delivery(ORDERS_0, 100, store.due(NOW, 10))
    store.finish_delivery(ORDERS_0, [record.pending_key])
    assert pending(store) == []
    assert store.summary() == {}
    assert store.deliveries_under_way() == []


# -- deliveries -----------------------------------------------------------------------------


def test_begin_delivery_notes_the_delivery(store: DelayStore) -> None:
    records = [delayed(ORDERS_0, offset, NOW + offset) for offset in range(3)]
    schedule(store, *records)
    store.begin_delivery(ORDERS_0, 42, [records[2], records[0], records[1]])
    assert store.deliveries_under_way() == [
        Delivery(
            ORDERS_0, 42, [records[2].pending_key, records[0].pending_key, records[1].pending_key]
        )
    ]


def test_delivery_notes_are_per_target_partition(store: DelayStore) -> None:
    first, second = delayed(ORDERS_0, 0, NOW), delayed(ORDERS_1, 0, NOW)
    schedule(store, first, second)
    store.begin_delivery(ORDERS_0, 10, [first])
    store.begin_delivery(ORDERS_1, 20, [second])
    assert store.deliveries_under_way() == [
        Delivery(ORDERS_0, 10, [first.pending_key]),
        Delivery(ORDERS_1, 20, [second.pending_key]),
    ]
    store.finish_delivery(ORDERS_0, [first.pending_key])
    assert store.deliveries_under_way() == [Delivery(ORDERS_1, 20, [second.pending_key])]


def test_begin_delivery_with_no_records_notes_the_offset(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    store.begin_delivery(ORDERS_0, 7, [])
    assert store.deliveries_under_way() == [Delivery(ORDERS_0, 7, [])]


def test_finish_delivery_removes_records_note_and_count(store: DelayStore) -> None:
    records = [delayed(ORDERS_0, offset, NOW + offset, key=bytes([offset])) for offset in range(3)]
    schedule(store, *records)
    store.begin_delivery(ORDERS_0, 0, records[:2])
    store.finish_delivery(ORDERS_0, [record.pending_key for record in records[:2]])
    assert pending(store) == [(NOW + 2, ORDERS_0, 2)]
    assert store.deliveries_under_way() == []
    assert store.summary() == {"orders": TopicSummary(1, NOW + 2)}


def test_finish_delivery_removes_by_key_entries(store: DelayStore, directory: Path) -> None:
    records = [delayed(ORDERS_0, 0, NOW, key=b"a"), delayed(ORDERS_0, 1, NOW, key=b"b")]
    schedule(store, *records)
    store.finish_delivery(ORDERS_0, [records[0].pending_key])
    assert by_key_entries(store, directory) == 1


def test_cancel_after_delivery_does_not_change_counts(store: DelayStore) -> None:
    delivered = delayed(ORDERS_0, 0, NOW, key=b"a")
    schedule(store, delivered, delayed(ORDERS_0, 1, NOW, key=b"b"))
    store.finish_delivery(ORDERS_0, [delivered.pending_key])
    store.schedule(delay_partition(ORDERS_1), [replace(delayed(ORDERS_1, 0, NOW + 1, b"a"))], 1)
    assert counts(store) == {"orders": 2}
    assert pending(store) == [(NOW, ORDERS_0, 1), (NOW + 1, ORDERS_1, 0)]


def test_new_record_with_a_delivered_key_can_still_be_cancelled(store: DelayStore) -> None:
    delivered = delayed(ORDERS_0, 0, NOW, key=b"a")
    schedule(store, delivered)
    store.finish_delivery(ORDERS_0, [delivered.pending_key])
    schedule(store, delayed(ORDERS_0, 1, NOW + 5, key=b"a"))
    store.schedule(delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, 2, NOW + 9, b"a"))], 3)
    assert pending(store) == [(NOW + 9, ORDERS_0, 2)]
    assert counts(store) == {"orders": 1}


def test_finishing_records_cancelled_meanwhile_is_harmless(store: DelayStore) -> None:
    cancelled, kept = delayed(ORDERS_0, 0, NOW, key=b"a"), delayed(ORDERS_0, 1, NOW, key=b"b")
    other = delayed(ORDERS_1, 0, NOW, key=b"c")
    schedule(store, cancelled, kept, other)
    store.begin_delivery(ORDERS_0, 0, [cancelled, kept])
    store.schedule(delay_partition(ORDERS_1), [replace(delayed(ORDERS_1, 1, NOW + 1, b"a"))], 2)
    store.finish_delivery(ORDERS_0, [cancelled.pending_key, kept.pending_key])
    assert pending(store) == [(NOW, ORDERS_1, 0), (NOW + 1, ORDERS_1, 1)]
    assert counts(store) == {"orders": 2}
    assert store.deliveries_under_way() == []


def test_finishing_twice_is_harmless(store: DelayStore) -> None:
    records = [delayed(ORDERS_0, offset, NOW) for offset in range(2)]
    schedule(store, *records)
    store.finish_delivery(ORDERS_0, [records[0].pending_key])
    store.finish_delivery(ORDERS_0, [records[0].pending_key])
    assert counts(store) == {"orders": 1}


# -- summary --------------------------------------------------------------------------------


def test_summary_counts_and_first_due_per_topic(store: DelayStore) -> None:
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW + 30),
        delayed(ORDERS_1, 0, NOW + 10),
        delayed(ORDERS_1, 1, NOW + 40),
        delayed(PAYMENTS_0, 0, NOW + 20),
    )
    assert store.summary() == {
        "orders": TopicSummary(3, NOW + 10),
        "payments": TopicSummary(1, NOW + 20),
    }


# -- reopening ------------------------------------------------------------------------------


def test_store_survives_reopen(store: DelayStore, directory: Path) -> None:
    records = [delayed(ORDERS_0, 3, NOW + 1, key=b"a"), delayed(PAYMENTS_0, 8, NOW + 2, key=b"b")]
    schedule(store, *records)
    store.begin_delivery(ORDERS_0, 17, records[:1])
    store.close()
    reopened = DelayStore(str(directory))
    try:
        assert reopened.exists
        assert pending(reopened) == [(NOW + 1, ORDERS_0, 3), (NOW + 2, PAYMENTS_0, 8)]
        due = reopened.due(FOREVER, 10)
        assert [record.packed for record in due] == [r.packed for r in records]
        assert reopened.position(delay_partition(ORDERS_0)) == 4
        assert reopened.position(delay_partition(PAYMENTS_0)) == 9
        assert reopened.deliveries_under_way() == [Delivery(ORDERS_0, 17, [records[0].pending_key])]
        assert reopened.summary() == {
            "orders": TopicSummary(1, NOW + 1),
            "payments": TopicSummary(1, NOW + 2),
        }
    finally:
        reopened.close()


def test_by_key_index_survives_reopen(store: DelayStore, directory: Path) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"))
    store.close()
    reopened = DelayStore(str(directory))
    try:
        reopened.schedule(
            delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, 1, NOW + 1, b"a"))], 2
        )
        assert pending(reopened) == [(NOW + 1, ORDERS_0, 1)]
        assert counts(reopened) == {"orders": 1}
    finally:
        reopened.close()


def test_closed_store_reopens_on_next_call(store: DelayStore) -> None:
    schedule(store, delayed(ORDERS_0, 0, NOW))
    store.close()
    assert store.next_due() == NOW


# -- forgetting a topic ---------------------------------------------------------------------


def forgotten_orders(store: DelayStore) -> list[DelayedRecord]:
    """Schedules and begins delivering records of orders and payments, then forgets orders."""
    records = [
        delayed(ORDERS_0, 0, NOW, key=b"a"),
        delayed(ORDERS_1, 0, NOW + 1, key=b"a"),
        delayed(PAYMENTS_0, 0, NOW + 2, key=b"a"),
    ]
    schedule(store, *records)
    store.begin_delivery(ORDERS_0, 5, records[:1])
    store.begin_delivery(PAYMENTS_0, 6, records[2:])
    store.forget_topic("orders", "orders.delay")
    return records


def test_forget_topic_removes_its_pending_records_and_count(store: DelayStore) -> None:
    forgotten_orders(store)
    assert pending(store) == [(NOW + 2, PAYMENTS_0, 0)]
    assert store.summary() == {"payments": TopicSummary(1, NOW + 2)}


def test_forget_topic_removes_its_delay_positions(store: DelayStore) -> None:
    forgotten_orders(store)
    assert store.position(delay_partition(ORDERS_0)) == 0
    assert store.position(delay_partition(ORDERS_1)) == 0
    assert store.position(delay_partition(PAYMENTS_0)) == 1


def test_forget_topic_removes_its_delivery_notes(store: DelayStore) -> None:
    records = forgotten_orders(store)
    assert store.deliveries_under_way() == [Delivery(PAYMENTS_0, 6, [records[2].pending_key])]


def test_forget_topic_removes_its_by_key_entries(store: DelayStore, directory: Path) -> None:
    forgotten_orders(store)
    assert by_key_entries(store, directory) == 1


def test_forget_topic_leaves_other_topics_cancellable(store: DelayStore) -> None:
    forgotten_orders(store)
    store.schedule(delay_partition(PAYMENTS_0), [replace(delayed(PAYMENTS_0, 1, NOW + 3, b"a"))], 2)
    assert pending(store) == [(NOW + 3, PAYMENTS_0, 1)]
    assert counts(store) == {"payments": 1}


def test_topic_can_be_recreated_after_forget(store: DelayStore) -> None:
    forgotten_orders(store)
    schedule(store, delayed(ORDERS_0, 0, NOW + 9, key=b"a"))
    assert counts(store) == {"orders": 1, "payments": 1}
    store.schedule(delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, 1, NOW + 10, b"a"))], 2)
    assert counts(store) == {"orders": 1, "payments": 1}


def test_forget_topic_spares_a_topic_whose_name_it_prefixes(store: DelayStore) -> None:
    longer = TopicPartition("orders.delay", 0)
    schedule(store, delayed(ORDERS_0, 0, NOW, key=b"a"), delayed(longer, 0, NOW + 1, key=b"a"))
    store.forget_topic("orders", "orders.delay")
    assert pending(store) == [(NOW + 1, longer, 0)]
    assert counts(store) == {"orders.delay": 1}
    assert store.position(delay_partition(longer)) == 1


# -- sizes and far due times ---------------------------------------------------------------


def test_huge_record_key_is_scheduled_replaced_and_delivered(store: DelayStore) -> None:
    key = bytes(range(256)) * 390 + b"x" * 160
    assert len(key) == 100_000
    first = delayed(ORDERS_0, 0, NOW, key=key)
    schedule(store, first)
    assert store.due(NOW, 1)[0].packed == first.packed
    second = delayed(ORDERS_0, 1, NOW + 1, key=key)
    store.schedule(delay_partition(ORDERS_0), [replace(second)], 2)
    assert pending(store) == [(NOW + 1, ORDERS_0, 1)]
    store.finish_delivery(ORDERS_0, [second.pending_key])
    assert store.summary() == {}


def test_huge_keys_differing_only_at_the_end_are_distinct(store: DelayStore) -> None:
    stem = b"k" * 99_999
    schedule(
        store,
        delayed(ORDERS_0, 0, NOW, key=stem + b"a"),
        delayed(ORDERS_0, 1, NOW, key=stem + b"b"),
    )
    store.schedule(delay_partition(ORDERS_0), [replace(delayed(ORDERS_0, 2, NOW, stem + b"a"))], 3)
    assert [offset for _, _, offset in pending(store)] == [1, 2]


def test_longest_topic_name_works(store: DelayStore, directory: Path) -> None:
    target = TopicPartition("t" * 249, 2_000_000)
    record = delayed(target, 1 << 40, NOW, key=b"a")
    schedule(store, record)
    assert pending(store) == [(NOW, target, 1 << 40)]
    assert store.position(delay_partition(target)) == (1 << 40) + 1
    store.begin_delivery(target, 3, [record])
    assert store.deliveries_under_way() == [Delivery(target, 3, [record.pending_key])]
    store.schedule(
        delay_partition(target), [replace(delayed(target, (1 << 40) + 1, NOW, b"a"))], (1 << 40) + 2
    )
    assert counts(store) == {target.topic: 1}
    store.forget_topic(target.topic, delay_partition(target).topic)
    assert store.summary() == {}
    assert store.deliveries_under_way() == []
    assert by_key_entries(store, directory) == 0


def test_far_due_times_order_after_near_ones(store: DelayStore) -> None:
    far = NOW + TWO_YEARS_MS
    schedule(
        store,
        delayed(ORDERS_0, 0, far),
        delayed(ORDERS_0, 1, NOW + 1),
        delayed(ORDERS_0, 2, far - 1),
        delayed(ORDERS_0, 3, NOW),
    )
    assert store.next_due() == NOW
    assert [due for due, _, _ in pending(store)] == [NOW, NOW + 1, far - 1, far]
    assert [record.source_offset for record in store.due(NOW + 1, 10)] == [3, 1]
    assert [record.source_offset for record in store.due(far - 1, 10)] == [3, 1, 2]


def test_due_times_across_byte_boundaries_order_numerically(store: DelayStore) -> None:
    dues: Sequence[int] = [1 << 40, 255, (1 << 32) + 1, 256, 1 << 32, 0, (1 << 63) - 1]
    schedule(store, *(delayed(ORDERS_0, offset, due) for offset, due in enumerate(dues)))
    assert [due for due, _, _ in pending(store)] == sorted(dues)
