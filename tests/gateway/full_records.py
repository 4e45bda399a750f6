"""Records for a topic's full-data view through gateways, and what a reader of the view
reads: shared by the gateway's view tests (test_gateway_full.py) and the move of a kshim
topic to Kafka (test_mirror_to_kafka.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.gateway.delay_clients import unique

PARTITIONS = 2
WAIT_S = 60.0
QUIET_S = 2.0

# partition -> [(offset, key, value)] of the committed records, in offset order
Records = dict[int, list[tuple[int, bytes | None, bytes | None]]]

# (partition, key) -> (offset, value): None for a tombstone.
View = dict[tuple[int, bytes], tuple[int, bytes | None]]


async def create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()


def produce_for_view(bootstrap: str, topic: str, rounds: range, view: View) -> None:
    """Keyed updates, tombstones and records without a key to both partitions, plus one
    committed and one aborted transaction; ``view`` gets what a view must hold."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for round_ in rounds:
        for index in range(20):
            partition, key = index % PARTITIONS, b"k%d" % index
            value = None if (round_ + index) % 7 == 0 else b"v%d-%d" % (round_, index)
            send(producer, topic, partition, key, value, view)
        producer.produce(topic, value=b"no key", partition=0)
    assert producer.flush(30) == 0
    transactions(bootstrap, topic, rounds.stop, view)


def send(
    producer: Producer, topic: str, partition: int, key: bytes, value: bytes | None, view: View
) -> None:
    def stored(error: KafkaError | None, message: object) -> None:
        assert error is None, error
        view[(partition, key)] = (message.offset(), value)  # type: ignore[attr-defined]

    producer.produce(topic, value=value, key=key, partition=partition, on_delivery=stored)


def transactions(bootstrap: str, topic: str, round_: int, view: View) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("full-tx")})
    producer.init_transactions(30)
    committed: View = {}
    for commit in (False, True):
        producer.begin_transaction()
        for index in (1, 2):
            target = committed if commit else {}
            send(producer, topic, index % PARTITIONS, b"k%d" % index, b"tx%d" % round_, target)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    view.update(committed)


Read = list[tuple[int, int, bytes, bytes | None]]  # partition, offset, key, value


def view_consumer(bootstrap: str, topic: str) -> Consumer:
    """A consumer of ``topic``.full in a group of its own, from the start."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("full-reader"),
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "topic.metadata.refresh.interval.ms": 1000, "session.timeout.ms": 6000,
    })  # fmt: skip
    consumer.subscribe([f"{topic}.full"])
    return consumer


def poll_view(consumer: Consumer, until: View, read: Read, seconds: float = WAIT_S) -> Read:
    """Adds to ``read`` what ``consumer`` reads until the latest record of each key read
    is ``until`` and a second more has brought nothing."""
    latest: View = {(p, k): (o, v) for p, o, k, v in read}
    deadline = time.monotonic() + seconds
    quiet_since = None
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error():
            if latest == until:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 1.0:
                    return read
            continue
        quiet_since = None
        entry = (message.partition(), message.offset(), message.key(), message.value())
        read.append(entry)
        latest[(entry[0], entry[2])] = (entry[1], entry[3])
    raise AssertionError(f"read {len(read)} records of the view, never the {len(until)} keys")


def read_view(bootstrap: str, topic: str, until: View, seconds: float = WAIT_S) -> Read:
    """Every record a new consumer reads of ``topic``.full until it holds ``until``."""
    consumer = view_consumer(bootstrap, topic)
    try:
        return poll_view(consumer, until, [], seconds)
    finally:
        consumer.close()


def exactly_once_each(read: Sequence[tuple[int, int, bytes, bytes | None]]) -> View:
    view: View = {}
    for partition, offset, key, value in read:
        assert (partition, key) not in view, f"{key!r} read twice from a fresh start"
        view[(partition, key)] = (offset, value)
    return view


def committed_records(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> Records:
    """Every committed record of ``topic``'s partitions, read until a quiet spell."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("copy-reader"),
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
    records: Records = {partition: [] for partition in range(partitions)}
    try:
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < QUIET_S:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            quiet_since = time.monotonic()
            entry = (message.offset(), message.key(), message.value())
            records[message.partition()].append(entry)
    finally:
        consumer.close()
    return records


def last_of_each_key(records: Records) -> View:
    """The view a topic holding ``records`` has: the latest record of each key."""
    view: View = {}
    for partition, entries in records.items():
        for offset, key, value in entries:
            if key is not None:
                view[(partition, key)] = (offset, value)
    return view
