"""Idempotence under faults: kill -9 of the broker while an idempotent producer retries.

A confluent-kafka producer with ``enable.idempotence`` writes unique values under a few
keys to three partitions, with many small batches in flight, while the broker is killed
(SIGKILL) and restarted on the same data directory twice. Batches the broker appended
and fsynced but could not acknowledge are retried with their original producer id,
epoch and sequence; the broker must recognise them from the producer state it recovers
(docs/protocol-notes.md §6.1: the last five batches per producer and partition, rebuilt from the
log) and answer with the original offsets instead of appending them again. Batches lost
before the fsync are appended on retry, in sequence order.

Afterwards every value is in the log exactly once, each key's values are in the order
they were produced, every delivery report succeeded, and each report's offset is where
the value actually is.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from kshim.testing import BrokerProcess
from tests.e2e.test_transactions import READ_UNCOMMITTED, create_topic, read_partition

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
KEYS = 12
RECORDS = 6000
KILL_AFTER_ACKED = (1500, 3500)  # kill the broker once this many records are acknowledged
DOWN_S = 0.3  # how long the broker stays dead
PRODUCE_DEADLINE_S = 60.0


def value_of(index: int) -> bytes:
    return b"%06d" % index


def key_of(index: int) -> bytes:
    return b"key-%02d" % (index % KEYS)


class DeliveryLog:
    """Delivery reports: the offset each value was acknowledged at, and any failures."""

    def __init__(self) -> None:
        self.offsets: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)
        self.failures: list[str] = []
        self.fatal: list[str] = []

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failures.append(f"{message.value()!r}: {error}")
        else:
            self.offsets[message.value()] = (message.partition(), message.offset())

    def on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(str(error))


def produce_through_kills(broker: BrokerProcess, topic: str, deliveries: DeliveryLog) -> None:
    """Produces RECORDS values, killing and restarting the broker at each threshold."""
    producer = Producer({
        "bootstrap.servers": broker.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 50,  # many small batches, up to five in flight
        "message.timeout.ms": int(PRODUCE_DEADLINE_S * 1000),
        "retry.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
        "error_cb": deliveries.on_error,
    })  # fmt: skip
    thresholds = list(KILL_AFTER_ACKED)
    deadline = time.monotonic() + PRODUCE_DEADLINE_S
    for index in range(RECORDS):
        producer.produce(topic, key=key_of(index), value=value_of(index),
                         on_delivery=deliveries.on_delivery)  # fmt: skip
        producer.poll(0)
        if index % 100 == 99:
            producer.poll(0.005)  # let acknowledgements come in while producing
        while thresholds and len(deliveries.offsets) >= thresholds[0]:
            thresholds.pop(0)
            broker.kill()
            time.sleep(DOWN_S)
            broker.start()
        assert time.monotonic() < deadline, "producing took too long"
    # Whatever was still short of a threshold: wait for the acknowledgements, then kill.
    while thresholds and time.monotonic() < deadline:
        producer.poll(0.05)
        if len(deliveries.offsets) >= thresholds[0]:
            thresholds.pop(0)
            broker.kill()
            time.sleep(DOWN_S)
            broker.start()
    assert not thresholds, "never reached every kill threshold"
    assert producer.flush(PRODUCE_DEADLINE_S) == 0


def test_each_record_exactly_once_after_kill_9(fresh_broker: BrokerProcess) -> None:
    topic = create_topic(fresh_broker.bootstrap, "idempotence-kill", partitions=PARTITIONS)
    deliveries = DeliveryLog()
    produce_through_kills(fresh_broker, topic, deliveries)
    assert deliveries.fatal == []
    assert deliveries.failures == []
    assert len(deliveries.offsets) == RECORDS

    stored: dict[bytes, tuple[int, int]] = {}
    by_key: defaultdict[bytes, list[int]] = defaultdict(list)
    total = 0
    for partition in range(PARTITIONS):
        records, end = read_partition(
            "confluent", fresh_broker.bootstrap, topic, partition, READ_UNCOMMITTED
        )
        # Dense offsets from 0: nothing lost, nothing written twice.
        assert [offset for offset, _ in records] == list(range(end))
        total += len(records)
        for offset, value in records:
            stored[value] = (partition, offset)
            index = int(value)
            by_key[key_of(index)].append(index)
    assert total == RECORDS  # no value twice (the dict below would hide it)
    assert sorted(stored) == [value_of(index) for index in range(RECORDS)]
    for key, indexes in by_key.items():
        assert indexes == sorted(indexes), f"{key!r} out of order"
    # Each acknowledgement (retries included) named the value's real place in the log.
    mismatched: dict[bytes, Any] = {
        value: (reported, stored[value])
        for value, reported in deliveries.offsets.items()
        if stored[value] != reported
    }
    assert mismatched == {}
