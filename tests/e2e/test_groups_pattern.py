"""A pattern subscription over 2,000 topics, with every client family and Spark's Java client.

2,000 single-partition topics hold one record each (the topic's name as value). A group of
one member per client family (kafka-python ``subscribe(pattern=...)``, aiokafka
``subscribe(pattern=...)``, confluent-kafka ``subscribe(["^..."])``) and Spark's Kafka
source with ``subscribePattern`` (kafka-clients 3.9 inside) must be assigned exactly the
2,000 topics and read every record once. Each topic ``T`` also has its full-data view
``T.full``, which the broker leaves out of Metadata for all topics so that patterns do
not match it (test_view_visibility.py checks that with an unanchored pattern); the
pattern here is anchored at both ends (``^prefix-[0-9]+$``) all the same, and the
assignment and the records must hold no view.

Spark's source lists the topics with an admin client unless told to use its older
consumer-based offset reader: that one subscribes a driver-side consumer to the pattern in
a consumer group, so the Java client's pattern subscription meets the group coordinator.
The Spark test skips with the reason when the connector jars are absent.

Other group tests at scale (a hundred members, 10,000 offsets in one request) are in
test_groups_scale.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer

from kshim.client.wire import connect
from kshim.testing import BrokerProcess, failure_lines, running_broker
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session
from tests.e2e.client_helpers import Deadline
from tests.e2e.group_clients import CLIENTS
from tests.e2e.group_helpers import unique
from tests.e2e.test_many_topics import create_topics

pytestmark = pytest.mark.slow


PATTERN_TOPICS = 2_000
PATTERN_WAIT_S = 90.0
RECORDS_PER_FETCH = 5_000

PatternRecord = tuple[str, int, int, bytes]  # topic, partition, offset, value


@dataclass(frozen=True, slots=True)
class PatternTopics:
    """A broker of its own with PATTERN_TOPICS one-partition topics holding one record
    each (its topic name as value), and the pattern that names exactly them."""

    broker: BrokerProcess
    topics: list[str]
    pattern: str

    def expected_records(self) -> list[PatternRecord]:
        return sorted((topic, 0, 0, topic.encode()) for topic in self.topics)

    def expected_assignment(self) -> set[tuple[str, int]]:
        return {(topic, 0) for topic in self.topics}


@dataclass(slots=True)
class PatternRead:
    """What one group member consumed, and what it was assigned at the end."""

    records: list[PatternRecord] = field(default_factory=list)
    assigned: set[tuple[str, int]] = field(default_factory=set)

    def add(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self.records.append((topic, partition, offset, value))


@pytest.fixture(scope="module")
def pattern_topics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PatternTopics]:
    """A broker of its own with the topics and their records; once it has stopped, its
    log must show no failure of its own."""
    prefix = unique("pattern")
    topics = [f"{prefix}-{index:04d}" for index in range(PATTERN_TOPICS)]
    # Anchored at both ends: "prefix-0001.full", the topic's full-data view, is not matched.
    # Character classes only: librdkafka's regex engine has no \d.
    pattern = f"^{prefix}-[0-9]+$"
    data_dir = tmp_path_factory.mktemp("pattern") / "data"
    with running_broker(data_dir=str(data_dir)) as broker:
        create_topics(broker.bootstrap, topics)
        produce_topic_names(broker.bootstrap, topics)
        yield PatternTopics(broker, topics, pattern)
    problems = failure_lines(broker.log_text())
    assert not problems, "broker log:\n" + "\n".join(problems[:20])


def produce_topic_names(bootstrap: str, topics: Sequence[str]) -> None:
    """One record to each topic, its name as value; waits for every acknowledgement."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for topic in topics:
        producer.produce(topic, value=topic.encode(), partition=0)
        producer.poll(0)  # serve delivery reports so the local queue never fills
    assert producer.flush(60) == 0


def kafka_python_pattern_read(bootstrap: str, group: str, pattern: str) -> PatternRead:
    read = PatternRead()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        consumer.subscribe(pattern=pattern)
        deadline = Deadline(PATTERN_WAIT_S)
        while len(read.records) < PATTERN_TOPICS and not deadline.expired():
            timeout_ms = int(deadline.poll_timeout_s() * 1000)
            batches = consumer.poll(timeout_ms=timeout_ms, max_records=RECORDS_PER_FETCH)
            for records in batches.values():
                for record in records:
                    read.add(record.topic, record.partition, record.offset, record.value)
        read.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        consumer.close()
    return read


async def aiokafka_pattern_read(bootstrap: str, group: str, pattern: str) -> PatternRead:
    read = PatternRead()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    consumer.subscribe(pattern=pattern)
    deadline = Deadline(PATTERN_WAIT_S)
    try:
        async with asyncio.timeout(deadline.remaining_s()):
            await consumer.start()  # returns once the member has its first assignment
        while len(read.records) < PATTERN_TOPICS and not deadline.expired():
            timeout_ms = int(deadline.poll_timeout_s() * 1000)
            batches = await consumer.getmany(timeout_ms=timeout_ms, max_records=RECORDS_PER_FETCH)
            for records in batches.values():
                for record in records:
                    read.add(record.topic, record.partition, record.offset, record.value)
        read.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        await consumer.stop()
    return read


def confluent_pattern_read(bootstrap: str, group: str, pattern: str) -> PatternRead:
    read = PatternRead()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([pattern])  # a leading "^" makes it a regex (librdkafka)
        deadline = Deadline(PATTERN_WAIT_S)
        while len(read.records) < PATTERN_TOPICS and not deadline.expired():
            for message in consumer.consume(RECORDS_PER_FETCH, deadline.poll_timeout_s()):
                assert message.error() is None, message.error()
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                value = message.value()
                assert topic is not None and partition is not None and offset is not None
                assert isinstance(value, bytes)
                read.add(topic, partition, offset, value)
        read.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        consumer.close()
    return read


PATTERN_READERS: dict[str, Callable[[str, str, str], PatternRead]] = {
    "kafka-python": kafka_python_pattern_read,
    "aiokafka": lambda *arguments: asyncio.run(aiokafka_pattern_read(*arguments)),
    "confluent": confluent_pattern_read,
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("client", CLIENTS)
def test_pattern_subscription_over_2000_topics(pattern_topics: PatternTopics, client: str) -> None:
    """One member: the group's assignment is the whole subscription."""
    group = unique(f"pattern-{client}")
    started = time.monotonic()
    read = PATTERN_READERS[client](pattern_topics.broker.bootstrap, group, pattern_topics.pattern)
    print(f"{client}: {len(read.records)} records in {time.monotonic() - started:.1f} s")
    assert read.assigned == pattern_topics.expected_assignment()
    assert sorted(read.records) == pattern_topics.expected_records()


SPARK_UNAVAILABLE = connector_unavailable_reason()
# Spark's SQL setting for the consumer-based offset reader (see the module docstring).
CONSUMER_OFFSET_READER = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
# Every topic is a task with a consumer of its own which, after its one record, long-polls
# the empty rest of the partition for fetch.max.wait.ms (500 ms by default) while the
# ListOffsets that Spark sends next waits behind it on the same connection (a broker answers
# a connection's requests in order, as Kafka does). Measured on 2 cores: at the default
# and 2 task slots, 2,000 topics took 9 minutes; at 10 ms and 6 task slots, 40 s.
FETCH_WAIT_MS = "10"
POLL_TIMEOUT_MS = "20000"  # an executor's poll; a broker that answers nothing fails in 20 s
# Reading a topic mostly waits on the network, so more tasks run at once than there are
# cores; each task reads a share of the topics (coalesce) rather than one, which saves
# Spark a task launch per topic (a quarter of the time here).
SPARK_TASKS = 6
DESCRIBE_GROUPS = 15


def describe_group(bootstrap: str, group: str) -> tuple[str, str]:
    """(state, protocol type) of a group, as DescribeGroups reports them."""
    with connect(bootstrap) as connection:
        (described,) = connection.call(DESCRIBE_GROUPS, 5, {"groups": [group]}).groups
    assert described.error_code == 0, described
    return described.group_state, described.protocol_type


@pytest.mark.spark
@pytest.mark.skipif(SPARK_UNAVAILABLE is not None, reason=SPARK_UNAVAILABLE or "")
@pytest.mark.timeout(300)
def test_spark_pattern_subscription_over_2000_topics(pattern_topics: PatternTopics) -> None:
    bootstrap, group = pattern_topics.broker.bootstrap, unique("pattern-spark")
    spark = kafka_spark_session("kshim-groups-pattern", f"local[{SPARK_TASKS}]")
    started = time.monotonic()
    try:
        spark.conf.set(CONSUMER_OFFSET_READER, "true")
        rows = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribePattern", pattern_topics.pattern)
            .option("kafka.group.id", group)  # the driver's group, to look at afterwards
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.fetch.max.wait.ms", FETCH_WAIT_MS)
            .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
            .load()
            .select("topic", "partition", "offset", "value")
            .coalesce(SPARK_TASKS)
            .collect()
        )
    finally:
        spark.stop()
    print(f"spark: {len(rows)} records in {time.monotonic() - started:.1f} s")
    records = [(r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in rows]
    # The driver reads the partitions to plan from its consumer's group assignment.
    assert sorted(records) == pattern_topics.expected_records()
    # Its consumer joined the group with the pattern's topics and left when done: an empty
    # group keeps its protocol type, while a group nobody joined would be Dead.
    assert describe_group(bootstrap, group) == ("Empty", "consumer")
