"""kill -9 of a real ``kshim serve`` under produce load, restarted on the same data dir.

Every record the producer saw acknowledged (acks=all) must be readable after
the restart, exactly once and in order, with dense offsets, and the broker
must accept new writes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from kshim.testing import BrokerProcess

ROUNDS = 3
TOPIC = "kill9"


def _produce_until_killed(
    broker: BrokerProcess, round_number: int, kill_after: int
) -> dict[int, bytes]:
    """Produces until ``kill_after`` records are acknowledged, then kills the broker."""
    acknowledged: dict[int, bytes] = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is None:
            acknowledged[message.offset()] = message.value()

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
    while len(acknowledged) < kill_after and time.monotonic() < deadline:
        producer.produce(TOPIC, key=b"k%d" % (sent % 7), value=b"r%d-%d" % (round_number, sent),
                         on_delivery=on_delivery)  # fmt: skip
        sent += 1
        producer.poll(0)
        if sent % 200 == 0:
            producer.poll(0.01)
    broker.kill()
    producer.purge()
    producer.flush(0)
    return acknowledged


def _read_everything(bootstrap: str) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kill9-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, low)])
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while (not records or records[-1][0] < high - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            records.append((message.offset(), message.value()))
        return records
    finally:
        consumer.close()


@pytest.mark.slow
def test_acknowledged_records_survive_kill_9(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    everything: dict[int, bytes] = {}
    try:
        for round_number in range(ROUNDS):
            kill_after = 2000 + 1000 * round_number
            acknowledged = _produce_until_killed(broker, round_number, kill_after)
            assert len(acknowledged) >= 2000
            broker.start()
            records = _read_everything(broker.bootstrap)
            offsets = [offset for offset, _ in records]
            assert offsets == list(range(len(records))), "offsets must be dense from 0"
            stored = dict(records)
            for offset, value in {**everything, **acknowledged}.items():
                assert stored.get(offset) == value, f"acknowledged record at {offset} lost"
            values = [value for _, value in records]
            assert len(values) == len(set(values)), "a record was stored twice"
            everything = stored
    finally:
        broker.stop()
