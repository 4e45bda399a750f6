"""The gateway's full-data view index (kshim/gateway/full/) against a real Apache Kafka: for
each owned partition of ``T``, the records read from the index up to its high watermark
are, per key, the latest committed record at its original offset: updates replace, a
tombstone stays, records without a key, an aborted transaction and an open one are not
there, a committed transaction is, and the open one appears once it commits."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest

from kshim.client.wire import parse_bootstrap
from kshim.gateway.full.index import ViewIndex
from kshim.protocol.record_batch import iter_batches
from kshim.protocol.records import decode_records
from kshim.storage.interface import TopicPartition
from kshim.testing import KafkaProcess

PARTITIONS = 2
WAIT_S = 15.0
# Enough records that the index reads a partition's backlog in several Fetch rounds (1 MiB
# each): readiness is then seen before the view is complete unless it waits for it.
BACKLOG_RECORDS = 2_500
VALUE_PAD = b"v" * 1_000

View = dict[bytes, tuple[int, bytes | None]]  # key -> (offset, value; None for a tombstone)


@dataclass
class Model:
    """What was produced to each partition, as the view must hold it."""

    committed: dict[int, View] = field(default_factory=lambda: {p: {} for p in range(PARTITIONS)})

    def add(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        if key is not None:
            self.committed[partition][key] = (offset, value)


class Producing:
    """Produces with delivery reports, so that each record's offset is known."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str | None = None) -> None:
        settings = {"bootstrap.servers": bootstrap, "linger.ms": 5}
        if transactional_id is not None:
            settings["transactional.id"] = transactional_id
        self.producer = confluent_kafka.Producer(settings)
        self.topic = topic
        self.delivered: list[tuple[int, int, bytes | None, bytes | None]] = []
        self.in_transaction: list[tuple[int, int, bytes | None, bytes | None]] = []

    def send(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        def report(error: object, message: confluent_kafka.Message) -> None:
            assert error is None, error
            offset = message.offset()
            assert offset is not None
            self.delivered.append((partition, offset, key, value))

        self.producer.produce(self.topic, value, key, partition, on_delivery=report)

    def flushed(self) -> list[tuple[int, int, bytes | None, bytes | None]]:
        assert self.producer.flush(WAIT_S) == 0
        delivered, self.delivered = self.delivered, []
        return delivered


@pytest.fixture
def topic(kafka_upstream: KafkaProcess) -> str:
    name = f"gw-full-{uuid.uuid4().hex[:8]}"
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kafka_upstream.bootstrap})
    [future] = admin.create_topics([confluent_kafka.admin.NewTopic(name, PARTITIONS, 1)]).values()
    future.result(WAIT_S)
    return name


@pytest.fixture
async def index(kafka_upstream: KafkaProcess, tmp_path: Path) -> AsyncIterator[ViewIndex]:
    view_index = ViewIndex(str(tmp_path / "views"), [parse_bootstrap(kafka_upstream.bootstrap)])
    yield view_index
    await view_index.close()


def _populate(bootstrap: str, topic: str, model: Model) -> Producing:
    """Keyed updates, a tombstone, records without a key, a committed and an aborted
    transaction; returns a producer whose transaction is left open."""
    plain = Producing(bootstrap, topic)
    for index in range(BACKLOG_RECORDS):
        plain.send(index % PARTITIONS, b"k%d" % (index % 300), b"%d-" % index + VALUE_PAD)
    plain.send(0, None, b"no key")
    plain.send(0, b"k1", None)  # a tombstone
    plain.send(1, None, b"no key either")
    for partition, offset, key, value in plain.flushed():
        model.add(partition, offset, key, value)
    for commit in (True, False):
        transactional = Producing(bootstrap, topic, f"{topic}-{commit}")
        transactional.producer.init_transactions(WAIT_S)
        transactional.producer.begin_transaction()
        for partition in range(PARTITIONS):
            transactional.send(partition, b"k2", b"committed" if commit else b"aborted")
            transactional.send(partition, b"txn-%d" % commit, b"only in a transaction")
        delivered = transactional.flushed()
        if commit:
            transactional.producer.commit_transaction(WAIT_S)
            for partition, offset, key, value in delivered:
                model.add(partition, offset, key, value)
        else:
            transactional.producer.abort_transaction(WAIT_S)
    left_open = Producing(bootstrap, topic, f"{topic}-open")
    left_open.producer.init_transactions(WAIT_S)
    left_open.producer.begin_transaction()
    for partition in range(PARTITIONS):
        left_open.send(partition, b"k3", b"open")
    left_open.in_transaction = left_open.flushed()
    return left_open


async def _view(index: ViewIndex, topic: str, partition: int) -> View:
    """Every live record, read from offset 0 to the high watermark as a consumer reads."""
    high_watermark = index.offsets(topic, partition).high_watermark
    view: View = {}
    position = 0
    while position < high_watermark:
        read = await index.read(topic, partition, position, 64 << 10)
        assert not read.out_of_range and read.batches
        for batch in read.batches:
            for _, header in iter_batches(batch):
                for record in decode_records(batch)[1]:
                    assert record.key is not None and record.key not in view
                    view[record.key] = (record.offset, record.value)
                position = header.next_offset
    return view


async def _equal(index: ViewIndex, topic: str, model: Model) -> bool:
    return [await _view(index, topic, p) for p in range(PARTITIONS)] == [
        model.committed[p] for p in range(PARTITIONS)
    ]


async def _until_ready(index: ViewIndex, topic: str, partition: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while not index.ready(topic, partition):
        assert time.monotonic() < deadline, f"{topic}-{partition} never ready"
        await asyncio.sleep(0.005)


async def test_view_is_the_latest_committed_record_of_each_key(
    kafka_upstream: KafkaProcess, index: ViewIndex, topic: str
) -> None:
    model = Model()
    left_open = await asyncio.to_thread(_populate, kafka_upstream.bootstrap, topic, model)
    for partition in range(PARTITIONS):
        await index.own(topic, partition)
        assert index.owns(topic, partition) and not index.ready(topic, partition)
    for partition in range(PARTITIONS):
        await _until_ready(index, topic, partition)
        assert await _view(index, topic, partition) == model.committed[partition]
        offsets = index.offsets(topic, partition)
        assert offsets.log_start_offset == 0
        assert offsets.high_watermark == offsets.last_stable_offset
    assert model.committed[0][b"k1"][1] is None  # the tombstone is kept
    assert model.committed[0][b"k2"][1] == b"committed"

    await asyncio.to_thread(left_open.producer.commit_transaction, WAIT_S)
    for partition, offset, key, value in left_open.in_transaction:
        model.add(partition, offset, key, value)
    deadline = time.monotonic() + WAIT_S
    while not await _equal(index, topic, model):
        assert time.monotonic() < deadline, "the committed transaction never appeared"
        await asyncio.sleep(0.05)


async def test_released_and_owned_again_is_resumed_where_it_was(
    kafka_upstream: KafkaProcess, index: ViewIndex, topic: str
) -> None:
    model = Model()
    left_open = await asyncio.to_thread(_populate, kafka_upstream.bootstrap, topic, model)
    # Ended first: while it is open, nothing produced after it is read (read_committed).
    await asyncio.to_thread(left_open.producer.abort_transaction, WAIT_S)
    await index.own(topic, 1)
    await _until_ready(index, topic, 1)
    first = await _view(index, topic, 1)
    assert first == model.committed[1]
    kept_at = index.offsets(topic, 1).high_watermark
    await index.release(topic, 1)
    assert not index.owns(topic, 1)
    # Kept on disk while released, and the partition goes on meanwhile.
    assert len(index._store.live_records(TopicPartition(topic, 1))) == len(first)
    producing = Producing(kafka_upstream.bootstrap, topic)
    producing.send(1, b"k1", b"updated while released")
    producing.send(1, b"released", b"new key")
    for partition, offset, key, value in await asyncio.to_thread(producing.flushed):
        model.add(partition, offset, key, value)
    await index.own(topic, 1)
    await _until_ready(index, topic, 1)
    assert index._owned_partition(topic, 1).resumed_at == kept_at
    assert index.offsets(topic, 1).log_start_offset == 0
    assert await _view(index, topic, 1) == model.committed[1]

    # Retention moved the log start: the view owned again is built from there, not resumed
    # (a rebuild would not hold the keys whose records went).
    resumed = await _view(index, topic, 1)
    await index.release(topic, 1)
    log_start = min(offset for offset, _ in resumed.values()) + 1  # past one key's last record
    await asyncio.to_thread(_delete_records, kafka_upstream.bootstrap, topic, 1, log_start)
    await index.own(topic, 1)
    await _until_ready(index, topic, 1)
    assert index._owned_partition(topic, 1).resumed_at is None
    assert index.offsets(topic, 1).log_start_offset == log_start
    left = {key: kept for key, kept in resumed.items() if kept[0] >= log_start}
    assert len(left) == len(resumed) - 1
    assert await _view(index, topic, 1) == left


async def test_a_view_kept_on_disk_is_resumed_by_the_next_index_on_it(
    kafka_upstream: KafkaProcess, topic: str, tmp_path: Path
) -> None:
    """A gateway restarted on the same --full-dir resumes the views it owns again."""
    producing = Producing(kafka_upstream.bootstrap, topic)
    for index_ in range(200):
        producing.send(0, b"k%d" % (index_ % 50), b"%d" % index_)
    expected: View = {}
    for _, offset, key, value in await asyncio.to_thread(producing.flushed):
        assert key is not None
        expected[key] = (offset, value)
    directory = str(tmp_path / "kept")
    first = ViewIndex(directory, [parse_bootstrap(kafka_upstream.bootstrap)])
    try:
        await first.own(topic, 0)
        await _until_ready(first, topic, 0)
        kept_at = first.offsets(topic, 0).high_watermark
    finally:
        await first.close()
    producing.send(0, b"k0", b"while no gateway ran")
    [(_, offset, _, _)] = await asyncio.to_thread(producing.flushed)
    expected[b"k0"] = (offset, b"while no gateway ran")
    second = ViewIndex(directory, [parse_bootstrap(kafka_upstream.bootstrap)])
    try:
        await second.own(topic, 0)
        await _until_ready(second, topic, 0)
        assert second._owned_partition(topic, 0).resumed_at == kept_at
        assert await _view(second, topic, 0) == expected
    finally:
        await second.close()


async def test_a_topic_created_again_under_its_name_is_rebuilt(
    kafka_upstream: KafkaProcess, index: ViewIndex, topic: str
) -> None:
    """The kept view is of the topic deleted: resumed on its successor (as long as the old
    one, so that only the topic id tells them apart) it would keep the old keys."""
    producing = Producing(kafka_upstream.bootstrap, topic)
    for index_ in range(20):
        producing.send(0, b"old-%d" % index_, b"old")
    await asyncio.to_thread(producing.flushed)
    await index.own(topic, 0)
    await _until_ready(index, topic, 0)
    await index.release(topic, 0)
    await asyncio.to_thread(_created_again, kafka_upstream.bootstrap, topic)
    producing = Producing(kafka_upstream.bootstrap, topic)
    for index_ in range(30):
        producing.send(0, b"new-%d" % index_, b"new")
    expected: View = {}
    for _, offset, key, value in await asyncio.to_thread(producing.flushed):
        assert key is not None
        expected[key] = (offset, value)
    await index.own(topic, 0)
    await _until_ready(index, topic, 0)
    assert index._owned_partition(topic, 0).resumed_at is None
    assert await _view(index, topic, 0) == expected


def _created_again(bootstrap: str, topic: str) -> None:
    """Deletes ``topic`` and creates it again (retried while Kafka still deletes it)."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    [deleted] = admin.delete_topics([topic]).values()
    deleted.result(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    new_topic = confluent_kafka.admin.NewTopic(topic, PARTITIONS, 1)
    while True:
        [created] = admin.create_topics([new_topic]).values()
        try:
            created.result(WAIT_S)
            return
        except confluent_kafka.KafkaException:
            assert time.monotonic() < deadline, f"{topic} not created again"
            time.sleep(0.2)


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    wanted = [confluent_kafka.TopicPartition(topic, partition, before)]
    [future] = admin.delete_records(wanted, request_timeout=WAIT_S).values()
    future.result(WAIT_S)


async def test_wait_beyond_returns_when_a_record_arrives(
    kafka_upstream: KafkaProcess, index: ViewIndex, topic: str
) -> None:
    await index.own(topic, 0)
    await _until_ready(index, topic, 0)
    high_watermark = index.offsets(topic, 0).high_watermark
    started = time.monotonic()
    await index.wait_beyond(topic, 0, high_watermark, 0.3)  # nothing new: the timeout
    assert time.monotonic() - started >= 0.3
    waiting = asyncio.create_task(index.wait_beyond(topic, 0, high_watermark, WAIT_S))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    producing = Producing(kafka_upstream.bootstrap, topic)
    producing.send(0, b"new", b"value")
    [(_, offset, _, _)] = await asyncio.to_thread(producing.flushed)
    started = time.monotonic()
    await asyncio.wait_for(waiting, WAIT_S)
    assert time.monotonic() - started < WAIT_S / 2
    assert index.offsets(topic, 0).high_watermark == offset + 1
    assert await _view(index, topic, 0) == {b"new": (offset, b"value")}


async def test_a_partition_owned_before_its_topic_exists_is_built_once_it_does(
    kafka_upstream: KafkaProcess, tmp_path: Path
) -> None:
    """Metadata lookups are retried (here past an address nobody listens on, then while
    the topic is unknown), and the loop goes on once the topic is there."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()
    upstream = [closed, parse_bootstrap(kafka_upstream.bootstrap)]
    index = ViewIndex(str(tmp_path / "views"), upstream)
    try:
        name = f"gw-full-{uuid.uuid4().hex[:8]}"
        await index.own(name, 0)
        await asyncio.sleep(0.5)
        assert not index.ready(name, 0)
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kafka_upstream.bootstrap})
        [future] = admin.create_topics([confluent_kafka.admin.NewTopic(name, 1, 1)]).values()
        await asyncio.to_thread(future.result, WAIT_S)
        producing = Producing(kafka_upstream.bootstrap, name)
        producing.send(0, b"key", b"value")
        [(_, offset, _, _)] = await asyncio.to_thread(producing.flushed)
        await index.wait_beyond(name, 0, offset, WAIT_S)
        assert await _view(index, name, 0) == {b"key": (offset, b"value")}
    finally:
        await index.close()
