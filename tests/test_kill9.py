"""kill -9 of a real ``kshim serve`` under produce load, restarted on the same data dir.

Every record the producer saw acknowledged (acks=all) must be readable after the
restart, exactly once and in order, with dense offsets, and the broker must accept new
writes. Records go to one topic, or round-robin over 100 topics whose partitions share
the write-ahead log; with small spill, checkpoint and write-ahead log file settings the
kill lands in the middle of spills, checkpoints and file rolls too.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from kshim.testing import BrokerProcess

ROUNDS = 3
# Spills, checkpoints and new write-ahead log files every few milliseconds.
BUSY_STORE = [
    "kshim.memtable.total.bytes=65536",
    "kshim.memtable.bytes=4096",
    "kshim.wal.segment.bytes=65536",
    "kshim.wal.checkpoint.bytes=100000",
    "kshim.wal.checkpoint.interval.ms=20",
]

# Per topic, what a producer saw acknowledged: offset -> value.
Acknowledged = dict[str, dict[int, bytes]]


def _produce_until_killed(
    broker: BrokerProcess, topics: list[str], round_number: int, kill_after: int
) -> Acknowledged:
    """Produces round-robin until ``kill_after`` records are acknowledged, then kills the
    broker."""
    acknowledged: Acknowledged = {topic: {} for topic in topics}
    count = 0

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        nonlocal count
        topic, offset, value = message.topic(), message.offset(), message.value()
        if error is None and topic is not None and offset is not None:
            assert isinstance(value, bytes)
            acknowledged[topic][offset] = value
            count += 1

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "message.timeout.ms": 5000,
        }
    )
    deadline = time.monotonic() + 60
    sent = 0
    while count < kill_after and time.monotonic() < deadline:
        topic = topics[sent % len(topics)]
        value = b"r%d-%d" % (round_number, sent)
        producer.produce(topic, key=b"k%d" % (sent % 7), value=value, on_delivery=on_delivery)
        sent += 1
        producer.poll(0)
        if sent % 200 == 0:
            producer.poll(0.01)
    broker.kill()
    producer.purge()
    producer.flush(0)
    return acknowledged


def _read_everything(bootstrap: str, topics: list[str]) -> dict[str, list[tuple[int, bytes]]]:
    """Every record of every topic, from each one's log start to its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kill9-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {}
        starts = []
        for topic in topics:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            ends[topic] = high
            starts.append(TopicPartition(topic, 0, low))
        consumer.assign(starts)
        records: dict[str, list[tuple[int, bytes]]] = {topic: [] for topic in topics}
        unfinished = {topic for topic, high in ends.items() if high > 0}
        deadline = time.monotonic() + 60
        while unfinished and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            topic, offset, value = message.topic(), message.offset(), message.value()
            assert topic is not None and offset is not None and isinstance(value, bytes)
            records[topic].append((offset, value))
            if offset >= ends[topic] - 1:
                unfinished.discard(topic)
        return records
    finally:
        consumer.close()


def _check(records: list[tuple[int, bytes]], acknowledged: dict[int, bytes], topic: str) -> None:
    offsets = [offset for offset, _ in records]
    assert offsets == list(range(len(records))), f"{topic}: offsets must be dense from 0"
    stored = dict(records)
    for offset, value in acknowledged.items():
        assert stored.get(offset) == value, f"{topic}: acknowledged record at {offset} lost"
    values = [value for _, value in records]
    assert len(values) == len(set(values)), f"{topic}: a record was stored twice"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("topic_count", "settings"),
    [(1, []), (100, []), (100, BUSY_STORE)],
    ids=["one-topic", "100-topics", "100-topics-busy-store"],
)
def test_acknowledged_records_survive_kill_9(
    tmp_path: Path, topic_count: int, settings: list[str]
) -> None:
    topics = [f"kill9-{index:03d}" for index in range(topic_count)]
    broker = BrokerProcess(tmp_path / "data", settings).start()
    everything: Acknowledged = {topic: {} for topic in topics}
    try:
        for round_number in range(ROUNDS):
            kill_after = 2000 + 1000 * round_number
            acknowledged = _produce_until_killed(broker, topics, round_number, kill_after)
            assert sum(map(len, acknowledged.values())) >= 2000
            broker.start()
            records = _read_everything(broker.bootstrap, topics)
            for topic in topics:
                _check(records[topic], {**everything[topic], **acknowledged[topic]}, topic)
                everything[topic] = dict(records[topic])
    finally:
        broker.stop()
