"""The socat route of benchmarks.gateway (benchmarks/relay_floor.py): clients bootstrapped
to socat are told about socat's port, so every byte they exchange with Kafka crosses it."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from benchmarks import relay_floor
from kshim.jvm import artifacts

TIMEOUT_S = 30.0
RECORDS = 200


def test_clients_bootstrapped_to_socat_stay_on_it() -> None:
    for reason in (relay_floor.socat_missing(), artifacts.unavailable_reason("kafka")):
        if reason is not None:
            pytest.skip(reason)
    with relay_floor.kafka_behind_socat() as relayed:
        through = relayed.relayed.bootstrap
        brokers = AdminClient({"bootstrap.servers": through}).list_topics(timeout=TIMEOUT_S)
        assert [f"{b.host}:{b.port}" for b in brokers.brokers.values()] == [through]
        direct = AdminClient({"bootstrap.servers": relayed.kafka.bootstrap})
        listed = direct.list_topics(timeout=TIMEOUT_S).brokers.values()
        assert [f"{b.host}:{b.port}" for b in listed] == [relayed.kafka.bootstrap]

        producer = Producer({"bootstrap.servers": through, "acks": "all"})
        for number in range(RECORDS):
            producer.produce("relayed", b"%d" % number)
        assert producer.flush(TIMEOUT_S) == 0
        consumer = Consumer({"bootstrap.servers": through, "group.id": "relayed"})
        consumer.assign([TopicPartition("relayed", 0, 0)])
        values: list[bytes | None] = []
        while len(values) < RECORDS:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None and message.error() is None
            values.append(message.value())
        consumer.close()
        assert values == [b"%d" % number for number in range(RECORDS)]
