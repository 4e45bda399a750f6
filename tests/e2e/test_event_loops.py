"""The broker on each event loop it can run on (``kshim.event.loop``): uvloop, the default,
and asyncio's own. With no in-memory tail every fetch answer is sent from the segment file,
so both ways of sending a file region are exercised (asyncio's loop.sendfile; os.sendfile
and a queued remainder on uvloop), with answers larger than a socket's send buffer."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from kshim.testing import running_broker
from tests.e2e.client_helpers import Deadline, unique_topic

RECORDS = 3000
VALUE_BYTES = 3000  # 9 MB in all: several 1 MiB fetch answers, each from the file


def value_of(index: int) -> bytes:
    return index.to_bytes(4, "big") * (VALUE_BYTES // 4)


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for index in range(RECORDS):
        producer.produce(topic, key=b"%d" % index, value=value_of(index))
        producer.poll(0)
    assert producer.flush(30) == 0


def read_with_confluent(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = Deadline()
    try:
        while len(values) < RECORDS and not deadline.expired():
            for message in consumer.consume(1000, deadline.poll_timeout_s()):
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    return values


def read_with_kafka_python(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = KafkaTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    values: list[bytes] = []
    deadline = Deadline()
    try:
        while len(values) < RECORDS and not deadline.expired():
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(record.value for record in batch)
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("loop_name", ["uvloop", "asyncio"])
def test_fetches_from_the_segment_file_on_each_event_loop(loop_name: str) -> None:
    settings = [f"kshim.event.loop={loop_name}", "kshim.memtable.bytes=0"]
    with running_broker(settings) as broker:
        topic = unique_topic(f"loop-{loop_name}")
        produce(broker.bootstrap, topic)
        expected = [value_of(index) for index in range(RECORDS)]

        assert read_with_confluent(broker.bootstrap, topic) == expected
        assert read_with_kafka_python(broker.bootstrap, topic) == expected
        assert f"event loop: {loop_name}" in broker.log_text()
