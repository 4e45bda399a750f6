"""The Java client (kafka-clients 3.9, the one inside Spark's connector) in a consumer group
and as a transactional producer, driven through PySpark's JVM gateway.

Spark's connector never joins groups itself, so these tests call the Java KafkaConsumer and
KafkaProducer classes directly from the JVM that the Spark session starts with the connector
jars on its classpath. Skipped with the reason when the jars or Java are absent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kshim.testing import BrokerProcess
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        connector_unavailable_reason() is not None, reason=str(connector_unavailable_reason())
    ),
]

BYTES_DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
BYTES_SERIALIZER = "org.apache.kafka.common.serialization.ByteArraySerializer"
POLL_DEADLINE_S = 30


@pytest.fixture(scope="module")
def jvm() -> Iterator[Any]:
    spark = kafka_spark_session("kshim-java-client", "local[1]")
    yield spark._jvm
    spark.stop()


def _properties(jvm: Any, settings: dict[str, str]) -> Any:
    properties = jvm.java.util.Properties()
    for key, value in settings.items():
        properties.setProperty(key, value)
    return properties


def _consumer(jvm: Any, bootstrap: str, group: str, isolation: str = "read_uncommitted") -> Any:
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
        "isolation.level": isolation,
        "key.deserializer": BYTES_DESERIALIZER,
        "value.deserializer": BYTES_DESERIALIZER,
    }
    return jvm.org.apache.kafka.clients.consumer.KafkaConsumer(_properties(jvm, settings))


def _poll_values(
    jvm: Any, consumer: Any, expected: int, quiet_s: float = 0.0
) -> list[tuple[int, bytes]]:
    """Polls until ``expected`` records arrived (then ``quiet_s`` more, to catch extras)."""
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + POLL_DEADLINE_S
    quiet_until: float | None = None
    while time.monotonic() < deadline:
        iterator = consumer.poll(jvm.java.time.Duration.ofMillis(200)).iterator()
        while iterator.hasNext():
            record = iterator.next()
            got.append((record.offset(), bytes(record.value())))
        if len(got) >= expected:
            quiet_until = quiet_until or time.monotonic() + quiet_s
            if time.monotonic() >= quiet_until:
                break
    return got


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for value in values:
        producer.send(topic, value=value)
    producer.flush()
    producer.close()


def test_java_consumer_group_resumes_after_its_commit(
    jvm: Any, shared_broker: BrokerProcess
) -> None:
    topic, group = f"java-group-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _produce(shared_broker.bootstrap, topic, [b"v%d" % index for index in range(10)])
    topics = jvm.java.util.ArrayList()
    topics.add(topic)

    consumer = _consumer(jvm, shared_broker.bootstrap, group)
    consumer.subscribe(topics)
    first = _poll_values(jvm, consumer, 10)
    assert first == [(index, b"v%d" % index) for index in range(10)]
    partition = jvm.org.apache.kafka.common.TopicPartition(topic, 0)
    offsets = jvm.java.util.HashMap()
    offsets.put(partition, jvm.org.apache.kafka.clients.consumer.OffsetAndMetadata(6))
    consumer.commitSync(offsets)
    committed = consumer.committed(jvm.java.util.Collections.singleton(partition))
    assert committed.get(partition).offset() == 6
    consumer.close()

    resumed = _consumer(jvm, shared_broker.bootstrap, group)
    resumed.subscribe(topics)
    assert _poll_values(jvm, resumed, 4, quiet_s=0.5) == [(i, b"v%d" % i) for i in range(6, 10)]
    resumed.close()


def test_java_transactions_are_visible_only_when_committed(
    jvm: Any, shared_broker: BrokerProcess
) -> None:
    topic = f"java-txn-{uuid.uuid4().hex[:8]}"
    settings = {
        "bootstrap.servers": shared_broker.bootstrap,
        "transactional.id": f"java-{uuid.uuid4().hex[:8]}",
        "key.serializer": BYTES_SERIALIZER,
        "value.serializer": BYTES_SERIALIZER,
    }
    producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(_properties(jvm, settings))
    producer.initTransactions()
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        producer.beginTransaction()
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord(topic, bytearray(value))
        producer.send(record).get()
        if commit:
            producer.commitTransaction()
        else:
            producer.abortTransaction()
    producer.close()

    partition = jvm.org.apache.kafka.common.TopicPartition(topic, 0)
    assignment = jvm.java.util.Collections.singletonList(partition)
    committed_reader = _consumer(jvm, shared_broker.bootstrap, "rc", "read_committed")
    committed_reader.assign(assignment)
    # Offsets 1, 3 and 5 are the markers; 2 is the aborted record.
    assert _poll_values(jvm, committed_reader, 2, quiet_s=0.5) == [
        (0, b"committed-1"),
        (4, b"committed-2"),
    ]
    end = committed_reader.endOffsets(assignment).get(partition)
    assert end == 6
    committed_reader.close()

    everything = _consumer(jvm, shared_broker.bootstrap, "ru", "read_uncommitted")
    everything.assign(assignment)
    assert [offset for offset, _ in _poll_values(jvm, everything, 3, quiet_s=0.5)] == [0, 2, 4]
    everything.close()
