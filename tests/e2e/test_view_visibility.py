"""Full-data views are read by name and never matched by a pattern subscription.

A broker of its own holds ``orders`` (two partitions) and ``orders_x``, each with its
view. A pattern ``^orders.*`` would match ``orders.full`` and ``orders_x.full`` too if the
broker listed them in Metadata for all topics, and every record would come twice: once
from its topic, once from the view. So each client family subscribes to the pattern and
must be assigned the topics' partitions only and read each record once; subscribed to
``orders.full`` by name, it must read the view's records (the latest value per key, at
its original offset).

The Java client is driven through Spark's Kafka source: ``subscribePattern`` with Spark's
default offset reader (``AdminClient.listTopics``, then the pattern) and with its
consumer-based one (a driver-side ``KafkaConsumer.subscribe(Pattern)`` in a consumer
group), then ``subscribe`` and ``assign`` of the view by name. Kafka Connect's
``topics.regex`` is that same consumer call (``WorkerSinkTask`` subscribes its consumer
to the pattern); Connect itself is not installed here, so the consumer-based Spark read
stands for it. The Spark tests skip with the reason when the connector jars are absent.

Listing the views again fails every pattern test here. Listing them marked ``is_internal``
instead fails confluent-kafka's pattern test (librdkafka's regex ignores the flag) and
Spark's read by name (its source drops internal topics even when named).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

from kshim.testing import BrokerProcess, failure_lines, running_broker
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session
from tests.e2e.client_helpers import Deadline
from tests.e2e.group_clients import CLIENTS
from tests.e2e.group_helpers import unique

if TYPE_CHECKING:  # pyspark is heavy to import, and not needed when Spark is skipped
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.timeout(60)

PATTERN = "^orders.*"  # librdkafka takes a subscription starting with "^" as a regex
VIEW = "orders.full"
# topic -> partition -> (key, value) in offset order
WRITES: dict[str, dict[int, list[tuple[bytes, bytes]]]] = {
    "orders": {0: [(b"a", b"1"), (b"a", b"2")], 1: [(b"b", b"1")]},
    "orders_x": {0: [(b"c", b"1")]},
}
Read = tuple[str, int, int, bytes | None, bytes | None]  # topic, partition, offset, key, value
TOPIC_RECORDS: list[Read] = sorted(
    (topic, partition, offset, key, value)
    for topic, partitions in WRITES.items()
    for partition, writes in partitions.items()
    for offset, (key, value) in enumerate(writes)
)
VIEW_RECORDS: list[Read] = [(VIEW, 0, 1, b"a", b"2"), (VIEW, 1, 0, b"b", b"1")]  # a@0 superseded
READ_WAIT_S = 20.0


@dataclass(slots=True)
class Consumed:
    """What one group member read, and its assignment at the end."""

    records: list[Read] = field(default_factory=list)
    assigned: set[tuple[str, int]] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Subscription:
    """A pattern, or topics by name: what a member subscribes to, and how many records it
    must read before it stops."""

    pattern: str | None
    topics: tuple[str, ...]
    expected: int


BY_PATTERN = Subscription(PATTERN, (), len(TOPIC_RECORDS))
BY_NAME = Subscription(None, (VIEW,), len(VIEW_RECORDS))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of its own (so that the pattern meets no other test's topics) holding the
    writes, with both views caught up; its log must show no failure of its own."""
    data_dir = tmp_path_factory.mktemp("view-visibility") / "data"
    with running_broker(data_dir=str(data_dir)) as broker:
        create_and_fill(broker.bootstrap)
        wait_views_caught_up(broker.bootstrap)
        yield broker
    problems = failure_lines(broker.log_text())
    assert not problems, "broker log:\n" + "\n".join(problems[:20])


def create_and_fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(topic, len(partitions), 1) for topic, partitions in WRITES.items()]
    for future in admin.create_topics(new).values():
        future.result(timeout=20)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for topic, partitions in WRITES.items():
        for partition, writes in partitions.items():
            for key, value in writes:
                producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(20) == 0


def wait_views_caught_up(bootstrap: str) -> None:
    """Until each view's high watermark reaches its topic's: a view read earlier could
    still hold a superseded record. A client of its own, closed before any pattern
    subscription: librdkafka's regex matches what its own metadata cache holds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("watermarks")})
    deadline = Deadline()
    try:
        for topic, partitions in WRITES.items():
            for partition, writes in partitions.items():
                view = ConfluentTopicPartition(topic + ".full", partition)
                while high_watermark(consumer, view) < len(writes):
                    assert not deadline.expired(), f"{view} has not caught up"
    finally:
        consumer.close()


def high_watermark(consumer: Consumer, partition: ConfluentTopicPartition) -> int:
    _, high = consumer.get_watermark_offsets(partition, timeout=5, cached=False)
    return int(high)


def kafka_python_read(bootstrap: str, subscription: Subscription) -> Consumed:
    consumed = Consumed()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=unique("kafka-python"),
        auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    try:
        if subscription.pattern is not None:
            consumer.subscribe(pattern=subscription.pattern)
        else:
            consumer.subscribe(list(subscription.topics))
        deadline = Deadline(READ_WAIT_S)
        while len(consumed.records) < subscription.expected and not deadline.expired():
            batches = consumer.poll(timeout_ms=int(deadline.poll_timeout_s() * 1000))
            consumed.records += _rows(batches)
        consumed.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        consumer.close()
    return consumed


def _rows(batches: Mapping[Any, Sequence[Any]]) -> list[Read]:
    """The records of a kafka-python poll or an aiokafka getmany, as rows."""
    return [
        (record.topic, record.partition, record.offset, record.key, record.value)
        for records in batches.values()
        for record in records
    ]


async def aiokafka_read(bootstrap: str, subscription: Subscription) -> Consumed:
    consumed = Consumed()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=unique("aiokafka"),
        auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    if subscription.pattern is not None:
        consumer.subscribe(pattern=subscription.pattern)
    else:
        consumer.subscribe(list(subscription.topics))
    deadline = Deadline(READ_WAIT_S)
    try:
        async with asyncio.timeout(deadline.remaining_s()):
            await consumer.start()
        while len(consumed.records) < subscription.expected and not deadline.expired():
            timeout_ms = int(deadline.poll_timeout_s() * 1000)
            batches = await consumer.getmany(timeout_ms=timeout_ms)
            consumed.records += _rows(batches)
        consumed.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        await consumer.stop()
    return consumed


def confluent_read(bootstrap: str, subscription: Subscription) -> Consumed:
    consumed = Consumed()
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("confluent"),
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    try:
        patterns = [] if subscription.pattern is None else [subscription.pattern]
        consumer.subscribe([*patterns, *subscription.topics])
        deadline = Deadline(READ_WAIT_S)
        while len(consumed.records) < subscription.expected and not deadline.expired():
            for message in consumer.consume(10, deadline.poll_timeout_s()):
                assert message.error() is None, message.error()
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                assert topic is not None and partition is not None and offset is not None
                consumed.records.append(
                    (topic, partition, offset, as_bytes(message.key()), as_bytes(message.value()))
                )
        consumed.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        consumer.close()
    return consumed


def as_bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


READERS: dict[str, Callable[[str, Subscription], Consumed]] = {
    "kafka-python": kafka_python_read,
    "aiokafka": lambda *arguments: asyncio.run(aiokafka_read(*arguments)),
    "confluent": confluent_read,
}


def partitions_of(records: Sequence[Read]) -> set[tuple[str, int]]:
    return {(topic, partition) for topic, partition, *_ in records}


TOPIC_PARTITIONS = {
    (topic, partition) for topic, partitions in WRITES.items() for partition in partitions
}
VIEW_PARTITIONS = {(VIEW, partition) for partition in WRITES["orders"]}


@pytest.mark.parametrize("client", CLIENTS)
def test_a_pattern_reads_each_record_once_from_the_topics(
    broker: BrokerProcess, client: str
) -> None:
    consumed = READERS[client](broker.bootstrap, BY_PATTERN)
    assert consumed.assigned == TOPIC_PARTITIONS  # neither view
    assert sorted(consumed.records) == TOPIC_RECORDS


@pytest.mark.parametrize("client", CLIENTS)
def test_the_view_subscribed_by_name_reads_the_latest_values(
    broker: BrokerProcess, client: str
) -> None:
    consumed = READERS[client](broker.bootstrap, BY_NAME)
    assert consumed.assigned == VIEW_PARTITIONS
    assert sorted(consumed.records) == VIEW_RECORDS


SPARK_UNAVAILABLE = connector_unavailable_reason()
# Spark's SQL setting for the consumer-based offset reader (see the module docstring).
CONSUMER_OFFSET_READER = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
POLL_TIMEOUT_MS = "20000"  # an executor's poll; a broker that answers nothing fails in 20 s


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = kafka_spark_session("kshim-view-visibility")
    yield session
    session.stop()


def spark_read(spark: SparkSession, bootstrap: str, **options: str) -> list[Read]:
    """A batch read of the Kafka source from earliest to latest, with ``options`` naming
    what to read."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    rows = reader.load().select("topic", "partition", "offset", "key", "value").collect()
    return sorted(spark_record(row) for row in rows)


def spark_record(row: Any) -> Read:
    key, value = row["key"], row["value"]
    return (
        row["topic"], row["partition"], row["offset"],
        None if key is None else bytes(key), None if value is None else bytes(value),
    )  # fmt: skip


@pytest.mark.spark
@pytest.mark.skipif(SPARK_UNAVAILABLE is not None, reason=SPARK_UNAVAILABLE or "")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("offset_reader", ["admin", "consumer"])
def test_spark_pattern_reads_each_record_once_from_the_topics(
    spark: SparkSession, broker: BrokerProcess, offset_reader: str
) -> None:
    """``admin``: ``listTopics`` then the pattern, Spark's default. ``consumer``: the
    Java consumer's ``subscribe(Pattern)`` in a group, as Kafka Connect's ``topics.regex``."""
    spark.conf.set(CONSUMER_OFFSET_READER, str(offset_reader == "consumer").lower())
    try:
        records = spark_read(spark, broker.bootstrap, subscribePattern=PATTERN)
    finally:
        spark.conf.unset(CONSUMER_OFFSET_READER)
    assert records == TOPIC_RECORDS


@pytest.mark.spark
@pytest.mark.skipif(SPARK_UNAVAILABLE is not None, reason=SPARK_UNAVAILABLE or "")
@pytest.mark.timeout(120)
def test_spark_reads_the_view_by_subscribe_and_assign(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    assert spark_read(spark, broker.bootstrap, subscribe=VIEW) == VIEW_RECORDS
    assignment = json.dumps({VIEW: sorted(WRITES["orders"])})
    assert spark_read(spark, broker.bootstrap, assign=assignment) == VIEW_RECORDS
