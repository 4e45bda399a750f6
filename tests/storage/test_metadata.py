"""The LMDB metadata store: topics, log start offsets and producer ids across reopens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys
from kshim.storage.meta.metadata import MetadataStore, TopicRecord
from kshim.storage.meta.transaction_store import AbortedTransaction

ORDERS = TopicRecord("orders", bytes(range(16)), 3, {"retention.ms": "1000"})
PAYMENTS = TopicRecord("payments", bytes(range(16, 32)), 1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(str(tmp_path / "meta"))
    yield opened
    opened.close()


def reopened(tmp_path: Path, store: MetadataStore) -> MetadataStore:
    store.close()
    return MetadataStore(str(tmp_path / "meta"))


def test_empty_store(store: MetadataStore) -> None:
    assert store.topics() == {}
    assert store.log_start_offset(TopicPartition("orders", 0)) == 0


def test_topic_record_json_round_trip() -> None:
    assert TopicRecord.from_json("orders", ORDERS.to_json()) == ORDERS
    assert TopicRecord.from_json("payments", PAYMENTS.to_json()) == PAYMENTS


def test_topics_put_and_read(store: MetadataStore) -> None:
    store.put_topic(ORDERS)
    store.put_topic(PAYMENTS)
    assert store.topics() == {"orders": ORDERS, "payments": PAYMENTS}


def test_put_topic_replaces_the_record(store: MetadataStore) -> None:
    store.put_topic(ORDERS)
    grown = TopicRecord("orders", ORDERS.topic_id, 5, {"cleanup.policy": "compact"})
    store.put_topic(grown)
    assert store.topics() == {"orders": grown}


def test_topics_survive_reopen(tmp_path: Path, store: MetadataStore) -> None:
    store.put_topic(ORDERS)
    store.put_topic(PAYMENTS)
    again = reopened(tmp_path, store)
    try:
        assert again.topics() == {"orders": ORDERS, "payments": PAYMENTS}
    finally:
        again.close()


def test_delete_topic_removes_it_and_its_log_start_offsets(store: MetadataStore) -> None:
    store.put_topic(ORDERS)
    store.put_topic(PAYMENTS)
    for partition in range(3):
        store.set_log_start_offset(TopicPartition("orders", partition), 10 + partition)
    store.set_log_start_offset(TopicPartition("payments", 0), 99)
    store.delete_topic("orders")
    assert store.topics() == {"payments": PAYMENTS}
    assert [store.log_start_offset(TopicPartition("orders", p)) for p in range(3)] == [0, 0, 0]
    assert store.log_start_offset(TopicPartition("payments", 0)) == 99


def test_delete_topic_spares_topics_sharing_a_name_prefix(store: MetadataStore) -> None:
    for name in ("orders", "orders2", "orders-eu", "order"):
        store.put_topic(TopicRecord(name, bytes(16), 2))
        for partition in range(2):
            store.set_log_start_offset(TopicPartition(name, partition), len(name) + partition)
    store.delete_topic("orders")
    assert sorted(store.topics()) == ["order", "orders-eu", "orders2"]
    for name in ("orders2", "orders-eu", "order"):
        for partition in range(2):
            assert store.log_start_offset(TopicPartition(name, partition)) == len(name) + partition


def _abort(store: MetadataStore, topic_partition: TopicPartition, first: int, marker: int) -> None:
    store.transactions.add_aborted(topic_partition, AbortedTransaction(7, first, marker))


def _markers(store: MetadataStore, topic_partition: TopicPartition) -> list[int]:
    return [entry.last_offset for entry in store.transactions.aborted(topic_partition)]


def test_delete_topic_forgets_its_aborted_transactions(store: MetadataStore) -> None:
    for name in ("orders", "orders2", "order"):
        store.put_topic(TopicRecord(name, bytes(16), 2))
        for partition in range(2):
            _abort(store, TopicPartition(name, partition), 0, 3)
    store.delete_topic("orders")
    assert [_markers(store, TopicPartition("orders", p)) for p in range(2)] == [[], []]
    for name in ("orders2", "order"):
        assert [_markers(store, TopicPartition(name, p)) for p in range(2)] == [[3], [3]]


def test_log_start_forgets_aborted_transactions_whose_marker_lies_below(
    tmp_path: Path, store: MetadataStore
) -> None:
    orders, other = TopicPartition("orders", 0), TopicPartition("orders", 1)
    for first, marker in ((0, 3), (4, 9), (8, 10), (12, 300)):
        _abort(store, orders, first, marker)
    _abort(store, other, 0, 3)
    store.set_log_start_offset(orders, 10)  # the marker at 10 is still in the log
    assert _markers(store, orders) == [10, 300]
    assert _markers(store, other) == [3]
    again = reopened(tmp_path, store)
    try:
        assert _markers(again, orders) == [10, 300]
        again.set_log_start_offset(orders, 2**40)
        assert _markers(again, orders) == []
        assert _markers(again, other) == [3]
    finally:
        again.close()


def test_delete_a_missing_topic_is_harmless(store: MetadataStore) -> None:
    store.put_topic(PAYMENTS)
    store.set_log_start_offset(TopicPartition("payments", 0), 4)
    store.delete_topic("nothing")
    store.delete_topic("zzz")  # past every key
    assert store.topics() == {"payments": PAYMENTS}
    assert store.log_start_offset(TopicPartition("payments", 0)) == 4


def test_log_start_offsets_survive_reopen(tmp_path: Path, store: MetadataStore) -> None:
    store.set_log_start_offset(TopicPartition("orders", 0), 5)
    store.set_log_start_offset(TopicPartition("orders", 1), 2**40)
    store.set_log_start_offset(TopicPartition("orders", 0), 7)  # overwritten
    again = reopened(tmp_path, store)
    try:
        assert again.log_start_offset(TopicPartition("orders", 0)) == 7
        assert again.log_start_offset(TopicPartition("orders", 1)) == 2**40
        assert again.log_start_offset(TopicPartition("orders", 2)) == 0
    finally:
        again.close()


def test_producer_ids_are_unique_across_reopen(tmp_path: Path, store: MetadataStore) -> None:
    first = [store.allocate_producer_id() for _ in range(5)]
    again = reopened(tmp_path, store)
    try:
        second = [again.allocate_producer_id() for _ in range(5)]
    finally:
        again.close()
    third_store = MetadataStore(str(tmp_path / "meta"))
    try:
        third = third_store.allocate_producer_id()
    finally:
        third_store.close()
    assert first == [0, 1, 2, 3, 4]
    assert len(set(first + second + [third])) == 11
    assert min(second) > max(first)
    assert third > max(second)


def test_partition_keys_sort_numerically_within_a_topic() -> None:
    keys = [
        lmdb_keys.partition_key(TopicPartition("t", partition))
        for partition in (0, 1, 255, 256, 70000)
    ]
    assert keys == sorted(keys)
    assert all(key.startswith(lmdb_keys.topic_prefix("t")) for key in keys)
    assert not lmdb_keys.partition_key(TopicPartition("tt", 0)).startswith(
        lmdb_keys.topic_prefix("t")
    )
    assert lmdb_keys.decode_int64(lmdb_keys.encode_int64(-(2**63))) == -(2**63)
