"""Black-box tests: kafka-python, aiokafka and confluent-kafka against a real ``kshim serve``.

Each client goes through the same scenarios, on its own code path (docs/protocol-notes.md §1.1,
§1.3; versions as negotiated with kshim's advertised maxima): aiokafka speaks ApiVersions
v0 / Produce v7 / Fetch v11 / ListOffsets v3, kafka-python Produce v9 / Fetch v12 /
ListOffsets v9, librdkafka Produce v10 / Fetch v12 / ListOffsets v7, plus FindCoordinator
for its assign-mode group.

- create a topic with the client's admin API;
- produce the sample records (null keys, null values, repeated and binary headers,
  explicit timestamps) in two batches, in every codec the client supports;
- read them back from the earliest offset and from an offset inside the second batch;
- ListOffsets by timestamp, earliest and latest, including a timestamp past the end;
- idempotent producing, acks 0 and 1, and the admin operations;
- a broker restart that must keep every acknowledged record.

Every consumer here uses assign() and seek(), so a failure points at the data path; consumer
groups have their own modules (test_groups_clients.py, test_groups_durability.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
)
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    OffsetSpec,
    ResourceType,
)
from confluent_kafka.admin import NewPartitions as ConfluentNewPartitions
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import ConfigResource as KafkaConfigResource

from kshim.testing import BrokerProcess
from tests.e2e.client_helpers import (
    CODECS,
    LINGER_MS,
    WAIT_S,
    ConsumedRecord,
    Deadline,
    SampleRecord,
    expected_records,
    normalise_headers,
    sample_records,
    timestamp_of,
    to_bytes,
    unique_topic,
)

pytestmark = pytest.mark.timeout(90)

RECORD_COUNT = 12
HALF = RECORD_COUNT // 2  # the first batch holds offsets 0-5, the second 6-11
# Inside the second batch: the broker returns that whole batch from offset 6 (compressed,
# for every codec but "none"), and the client must drop the records before this one.
MIDDLE_OFFSET = HALF + 2
REQUEST_TIMEOUT_MS = 10_000
CREATE_TIME = 0  # timestamp type of a record stamped by its producer
DEFAULT_RETENTION_MS = str(7 * 24 * 3600 * 1000)
DELETE_BEFORE = 4  # DeleteRecords moves the log start offset here
ADMIN_RECORDS = 10


def timestamp_queries(count: int = RECORD_COUNT) -> list[tuple[int, int | None]]:
    """(timestamp asked for, offset ListOffsets must answer) pairs; None when past the end.

    Kafka answers the first offset whose timestamp is at or after the one asked for.
    """
    last = timestamp_of(count - 1)
    return [
        (timestamp_of(0) - 60_000, 0),  # before the first record
        (timestamp_of(MIDDLE_OFFSET) - 1, MIDDLE_OFFSET),  # between records: the next one
        (timestamp_of(MIDDLE_OFFSET), MIDDLE_OFFSET),  # exact, inside a compressed batch
        (timestamp_of(HALF), HALF),  # the first record of the second batch
        (last, count - 1),
        (last + 1, None),  # past the last record
    ]


def halves(records: Sequence[SampleRecord]) -> list[Sequence[SampleRecord]]:
    """The records in two batches, each flushed separately."""
    return [records[:HALF], records[HALF:]]


def python_client_codec(codec: str) -> str | None:
    """kafka-python's and aiokafka's compression_type: None for no compression."""
    return None if codec == "none" else codec


# --------------------------------------------------------------------------------------
# kafka-python
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def kafka_python_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        yield admin
    finally:
        admin.close()


def kafka_python_create_topic(
    admin: KafkaAdminClient, topic: str, configs: Mapping[str, str] | None = None
) -> None:
    result = admin.create_topics(
        {topic: {"num_partitions": 1, "replication_factor": 1, "configs": dict(configs or {})}}
    )
    assert [(answer["name"], answer["error_code"]) for answer in result["topics"]] == [(topic, 0)]


@contextlib.contextmanager
def kafka_python_producer(bootstrap: str, **config: Any) -> Iterator[KafkaProducer]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=LINGER_MS,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        max_block_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=int(WAIT_S * 1000),
        reconnect_backoff_max_ms=500,
        **config,
    )
    try:
        yield producer
    finally:
        producer.close(timeout=5)


def kafka_python_send(
    producer: KafkaProducer, topic: str, batches: Sequence[Sequence[SampleRecord]]
) -> list[int]:
    """Sends each batch, flushes it, and returns the offset of every record."""
    offsets = []
    for batch in batches:
        futures = [
            producer.send(
                topic,
                key=record.key,
                value=record.value,
                headers=list(record.headers),
                partition=0,
                timestamp_ms=record.timestamp_ms,
            )
            for record in batch
        ]
        producer.flush(timeout=WAIT_S)
        offsets += [future.get(timeout=WAIT_S).offset for future in futures]
    return offsets


@contextlib.contextmanager
def kafka_python_consumer(bootstrap: str) -> Iterator[KafkaConsumer]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS + 1000,
        reconnect_backoff_max_ms=500,
    )
    try:
        yield consumer
    finally:
        consumer.close()


def from_python_client(record: Any) -> ConsumedRecord:
    """A kafka-python or aiokafka ConsumerRecord, normalised."""
    assert record.timestamp_type == CREATE_TIME
    return ConsumedRecord(
        record.offset,
        to_bytes(record.key),
        to_bytes(record.value),
        normalise_headers(record.headers),
        record.timestamp,
    )


def kafka_python_read(consumer: KafkaConsumer, tp: Any, count: int) -> list[ConsumedRecord]:
    """Polls until ``count`` records arrived or the deadline passed; returns what arrived."""
    received: list[ConsumedRecord] = []
    deadline = Deadline()
    while len(received) < count and not deadline.expired():
        batches = consumer.poll(
            timeout_ms=int(deadline.poll_timeout_s() * 1000), max_records=count - len(received)
        )
        received += [from_python_client(record) for record in batches.get(tp, [])]
    return received


def kafka_python_read_all(bootstrap: str, topic: str, count: int) -> list[ConsumedRecord]:
    tp = KafkaTopicPartition(topic, 0)
    with kafka_python_consumer(bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return kafka_python_read(consumer, tp, count)


def kafka_python_offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(earliest, latest) offsets of partition 0."""
    tp = KafkaTopicPartition(topic, 0)
    with kafka_python_consumer(bootstrap) as consumer:
        return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_round_trip(shared_broker: BrokerProcess, codec: str) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic(f"kp-{codec}")
    records = sample_records(RECORD_COUNT)
    with kafka_python_admin(bootstrap) as admin:
        kafka_python_create_topic(admin, topic)
        [description] = admin.describe_topics([topic])
        assert [p["partition_index"] for p in description["partitions"]] == [0]
    compression = python_client_codec(codec)
    with kafka_python_producer(bootstrap, compression_type=compression) as producer:
        assert kafka_python_send(producer, topic, halves(records)) == list(range(RECORD_COUNT))

    tp = KafkaTopicPartition(topic, 0)
    with kafka_python_consumer(bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        assert kafka_python_read(consumer, tp, RECORD_COUNT) == expected_records(records)
        consumer.seek(tp, MIDDLE_OFFSET)
        from_middle = kafka_python_read(consumer, tp, RECORD_COUNT - MIDDLE_OFFSET)
        assert from_middle == expected_records(records)[MIDDLE_OFFSET:]

        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: RECORD_COUNT}
        for timestamp, offset in timestamp_queries():
            [(answered_tp, answer)] = consumer.offsets_for_times({tp: timestamp}).items()
            assert answered_tp == tp
            if offset is None:
                assert answer is None, timestamp
            else:
                assert (answer.offset, answer.timestamp) == (offset, timestamp_of(offset))


def test_kafka_python_idempotent_producers(shared_broker: BrokerProcess) -> None:
    """Two idempotent producers (kafka-python's default) in turn: every record exactly once."""
    bootstrap, topic = shared_broker.bootstrap, unique_topic("kp-idempotent")
    records = sample_records(2 * RECORD_COUNT)
    first, second = records[:RECORD_COUNT], records[RECORD_COUNT:]
    with kafka_python_producer(bootstrap) as producer:
        assert producer.config["enable_idempotence"] is True
        assert kafka_python_send(producer, topic, halves(first)) == list(range(RECORD_COUNT))
    with kafka_python_producer(bootstrap, enable_idempotence=True, compression_type="lz4") as p:
        offsets = kafka_python_send(p, topic, halves(second))
        assert offsets == list(range(RECORD_COUNT, 2 * RECORD_COUNT))
    assert kafka_python_read_all(bootstrap, topic, len(records)) == expected_records(records)
    assert kafka_python_offsets(bootstrap, topic) == (0, len(records))


@pytest.mark.parametrize("acks", [0, 1])
def test_kafka_python_acks(shared_broker: BrokerProcess, acks: int) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic(f"kp-acks{acks}")
    records = sample_records(RECORD_COUNT)
    with kafka_python_producer(bootstrap, acks=acks, enable_idempotence=False) as producer:
        offsets = kafka_python_send(producer, topic, halves(records))
    if acks == 1:
        assert offsets == list(range(RECORD_COUNT))
    # With acks=0 nothing says when the broker has appended: the bounded read waits for it.
    assert kafka_python_read_all(bootstrap, topic, RECORD_COUNT) == expected_records(records)
    assert kafka_python_offsets(bootstrap, topic) == (0, RECORD_COUNT)


def test_kafka_python_admin_lifecycle(shared_broker: BrokerProcess) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic("kp-admin")
    resource = KafkaConfigResource("TOPIC", topic)
    with kafka_python_admin(bootstrap) as admin:
        kafka_python_create_topic(admin, topic, {"retention.ms": "3600000"})

        # The default filter keeps only configs whose source says they were set on the topic.
        modified = admin.describe_configs([resource])["topic"][topic]
        assert {name: entry["value"] for name, entry in modified.items()} == {
            "retention.ms": "3600000"
        }
        assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        every = admin.describe_configs([resource], config_filter="all")["topic"][topic]
        assert every["cleanup.policy"]["value"] == "delete"
        assert every["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
        assert every["max.message.bytes"]["value"] == "1048588"

        # IncrementalAlterConfigs: only the named key changes, the earlier override stays.
        change = KafkaConfigResource("TOPIC", topic, {"max.message.bytes": "2000000"})
        assert admin.alter_configs([change], incremental=True) == {"topic": {topic: "OK"}}
        modified = admin.describe_configs([resource])["topic"][topic]
        assert {name: entry["value"] for name, entry in modified.items()} == {
            "retention.ms": "3600000",
            "max.message.bytes": "2000000",
        }

        admin.create_partitions({topic: 3})
        [description] = admin.describe_topics([topic])
        assert sorted(p["partition_index"] for p in description["partitions"]) == [0, 1, 2]
        with kafka_python_producer(bootstrap) as producer:
            records = sample_records(ADMIN_RECORDS)
            assert kafka_python_send(producer, topic, [records]) == list(range(ADMIN_RECORDS))
            on_new_partition = producer.send(topic, key=b"k", value=b"v", partition=2)
            assert on_new_partition.get(timeout=WAIT_S).offset == 0

        tp = KafkaTopicPartition(topic, 0)
        deleted = admin.delete_records({tp: DELETE_BEFORE})
        assert deleted[tp]["low_watermark"] == DELETE_BEFORE
        assert kafka_python_offsets(bootstrap, topic) == (DELETE_BEFORE, ADMIN_RECORDS)
        remaining = kafka_python_read_all(bootstrap, topic, ADMIN_RECORDS - DELETE_BEFORE)
        assert remaining == expected_records(records)[DELETE_BEFORE:]

        result = admin.delete_topics([topic])
        assert [(answer["name"], answer["error_code"]) for answer in result["topics"]] == [
            (topic, 0)
        ]
        assert topic not in admin.list_topics()


# --------------------------------------------------------------------------------------
# aiokafka
# --------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def aiokafka_admin(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    async with asyncio.timeout(WAIT_S):
        await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def aiokafka_create_topic(
    admin: AIOKafkaAdminClient, topic: str, configs: Mapping[str, str] | None = None
) -> None:
    new_topic = NewTopic(topic, 1, 1, topic_configs=dict(configs or {}))
    async with asyncio.timeout(WAIT_S):
        response = await admin.create_topics([new_topic])
    assert response.to_object()["topic_errors"] == [
        {"topic": topic, "error_code": 0, "error_message": None}
    ]


@contextlib.asynccontextmanager
async def aiokafka_producer(bootstrap: str, **config: Any) -> AsyncIterator[AIOKafkaProducer]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=LINGER_MS,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **config,
    )
    async with asyncio.timeout(WAIT_S):
        await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


async def aiokafka_send(
    producer: AIOKafkaProducer, topic: str, batches: Sequence[Sequence[SampleRecord]]
) -> list[int | None]:
    """Sends each batch, flushes it, and returns the offset of every record.

    With acks=0 aiokafka resolves each send with None instead of record metadata.
    """
    offsets: list[int | None] = []
    async with asyncio.timeout(WAIT_S):
        for batch in batches:
            futures = [
                await producer.send(
                    topic,
                    key=record.key,
                    value=record.value,
                    headers=list(record.headers),
                    partition=0,
                    timestamp_ms=record.timestamp_ms,
                )
                for record in batch
            ]
            await producer.flush()
            results = await asyncio.gather(*futures)
            offsets += [None if metadata is None else metadata.offset for metadata in results]
    return offsets


@contextlib.asynccontextmanager
async def aiokafka_consumer(bootstrap: str) -> AsyncIterator[AIOKafkaConsumer]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    async with asyncio.timeout(WAIT_S):
        await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def aiokafka_read(
    consumer: AIOKafkaConsumer, tp: AioTopicPartition, count: int
) -> list[ConsumedRecord]:
    """Fetches until ``count`` records arrived or the deadline passed; returns what arrived."""
    received: list[ConsumedRecord] = []
    deadline = Deadline()
    while len(received) < count and not deadline.expired():
        batches = await consumer.getmany(
            tp,
            timeout_ms=int(deadline.poll_timeout_s() * 1000),
            max_records=count - len(received),
        )
        received += [from_python_client(record) for record in batches.get(tp, [])]
    return received


async def aiokafka_read_all(bootstrap: str, topic: str, count: int) -> list[ConsumedRecord]:
    tp = AioTopicPartition(topic, 0)
    async with aiokafka_consumer(bootstrap) as consumer:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        return await aiokafka_read(consumer, tp, count)


async def aiokafka_offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(earliest, latest) offsets of partition 0."""
    tp = AioTopicPartition(topic, 0)
    async with aiokafka_consumer(bootstrap) as consumer, asyncio.timeout(WAIT_S):
        earliest = await consumer.beginning_offsets([tp])
        latest = await consumer.end_offsets([tp])
    return earliest[tp], latest[tp]


@pytest.mark.parametrize("codec", CODECS)
async def test_aiokafka_round_trip(shared_broker: BrokerProcess, codec: str) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic(f"aio-{codec}")
    records = sample_records(RECORD_COUNT)
    async with aiokafka_admin(bootstrap) as admin:
        await aiokafka_create_topic(admin, topic)
        [description] = await admin.describe_topics([topic])
        assert [p["partition"] for p in description["partitions"]] == [0]
    compression = python_client_codec(codec)
    async with aiokafka_producer(bootstrap, compression_type=compression) as producer:
        offsets = await aiokafka_send(producer, topic, halves(records))
        assert offsets == list(range(RECORD_COUNT))

    tp = AioTopicPartition(topic, 0)
    async with aiokafka_consumer(bootstrap) as consumer:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        assert await aiokafka_read(consumer, tp, RECORD_COUNT) == expected_records(records)
        consumer.seek(tp, MIDDLE_OFFSET)
        from_middle = await aiokafka_read(consumer, tp, RECORD_COUNT - MIDDLE_OFFSET)
        assert from_middle == expected_records(records)[MIDDLE_OFFSET:]

        async with asyncio.timeout(WAIT_S):
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: RECORD_COUNT}
            for timestamp, offset in timestamp_queries():
                answers = await consumer.offsets_for_times({tp: timestamp})
                if offset is None:
                    assert answers == {tp: None}, timestamp
                else:
                    answer = answers[tp]
                    assert (answer.offset, answer.timestamp) == (offset, timestamp_of(offset))


async def test_aiokafka_idempotent_producer(shared_broker: BrokerProcess) -> None:
    """aiokafka sends InitProducerId v0, which tansu refused (docs/protocol-notes.md §0.11)."""
    bootstrap, topic = shared_broker.bootstrap, unique_topic("aio-idempotent")
    records = sample_records(2 * RECORD_COUNT)
    first, second = records[:RECORD_COUNT], records[RECORD_COUNT:]
    async with aiokafka_producer(bootstrap, enable_idempotence=True) as producer:
        assert await aiokafka_send(producer, topic, halves(first)) == list(range(RECORD_COUNT))
    async with aiokafka_producer(
        bootstrap, enable_idempotence=True, compression_type="gzip"
    ) as producer:
        offsets = await aiokafka_send(producer, topic, halves(second))
        assert offsets == list(range(RECORD_COUNT, 2 * RECORD_COUNT))
    assert await aiokafka_read_all(bootstrap, topic, len(records)) == expected_records(records)
    assert await aiokafka_offsets(bootstrap, topic) == (0, len(records))


@pytest.mark.parametrize("acks", [0, 1])
async def test_aiokafka_acks(shared_broker: BrokerProcess, acks: int) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic(f"aio-acks{acks}")
    records = sample_records(RECORD_COUNT)
    async with aiokafka_producer(bootstrap, acks=acks) as producer:
        offsets = await aiokafka_send(producer, topic, halves(records))
    if acks == 1:
        assert offsets == list(range(RECORD_COUNT))
    assert await aiokafka_read_all(bootstrap, topic, RECORD_COUNT) == expected_records(records)
    assert await aiokafka_offsets(bootstrap, topic) == (0, RECORD_COUNT)


async def aiokafka_topic_configs(admin: AIOKafkaAdminClient, topic: str) -> dict[str, Any]:
    """{name: (value, config source)} of every config of ``topic``."""
    resource = AioConfigResource(AioConfigResourceType.TOPIC, topic)
    async with asyncio.timeout(WAIT_S):
        [response] = await admin.describe_configs([resource])
    [described] = response.to_object()["resources"]
    assert (described["error_code"], described["resource_name"]) == (0, topic)
    return {
        entry["config_names"]: (entry["config_value"], entry["config_source"])
        for entry in described["config_entries"]
    }


async def test_aiokafka_admin_lifecycle(shared_broker: BrokerProcess) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic("aio-admin")
    dynamic, default = 1, 5  # DescribeConfigs ConfigSource values
    async with aiokafka_admin(bootstrap) as admin:
        await aiokafka_create_topic(admin, topic, {"retention.ms": "3600000"})
        configs = await aiokafka_topic_configs(admin, topic)
        assert configs["retention.ms"] == ("3600000", dynamic)
        assert configs["max.message.bytes"] == ("1048588", default)
        assert configs["cleanup.policy"] == ("delete", default)

        # aiokafka has only the legacy AlterConfigs, which replaces the whole set of
        # overrides: retention.ms, not named, returns to its default (Kafka's semantics).
        change = AioConfigResource(
            AioConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "2000000"}
        )
        async with asyncio.timeout(WAIT_S):
            [altered] = await admin.alter_configs([change])
        assert [
            (r["error_code"], r["resource_name"]) for r in altered.to_object()["resources"]
        ] == [(0, topic)]
        configs = await aiokafka_topic_configs(admin, topic)
        assert configs["max.message.bytes"] == ("2000000", dynamic)
        assert configs["retention.ms"] == (DEFAULT_RETENTION_MS, default)

        async with asyncio.timeout(WAIT_S):
            await admin.create_partitions({topic: NewPartitions(3)})
            [description] = await admin.describe_topics([topic])
        assert sorted(p["partition"] for p in description["partitions"]) == [0, 1, 2]
        records = sample_records(ADMIN_RECORDS)
        async with aiokafka_producer(bootstrap) as producer:
            assert await aiokafka_send(producer, topic, [records]) == list(range(ADMIN_RECORDS))
            async with asyncio.timeout(WAIT_S):
                metadata = await producer.send_and_wait(topic, key=b"k", value=b"v", partition=2)
            assert (metadata.partition, metadata.offset) == (2, 0)

        tp = AioTopicPartition(topic, 0)
        async with asyncio.timeout(WAIT_S):
            deleted = await admin.delete_records({tp: RecordsToDelete(DELETE_BEFORE)})
        assert deleted == {tp: DELETE_BEFORE}
        assert await aiokafka_offsets(bootstrap, topic) == (DELETE_BEFORE, ADMIN_RECORDS)
        remaining = await aiokafka_read_all(bootstrap, topic, ADMIN_RECORDS - DELETE_BEFORE)
        assert remaining == expected_records(records)[DELETE_BEFORE:]

        async with asyncio.timeout(WAIT_S):
            response = await admin.delete_topics([topic])
            assert response.to_object()["topic_error_codes"] == [{"topic": topic, "error_code": 0}]
            assert topic not in await admin.list_topics()


# --------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)
# --------------------------------------------------------------------------------------


def confluent_admin(bootstrap: str) -> AdminClient:
    """librdkafka's admin client has no close(); it is released when collected."""
    return AdminClient({"bootstrap.servers": bootstrap})


def confluent_create_topic(
    admin: AdminClient, topic: str, config: Mapping[str, str] | None = None
) -> None:
    new_topic = ConfluentNewTopic(
        topic, num_partitions=1, replication_factor=1, config=dict(config or {})
    )
    futures = admin.create_topics([new_topic], operation_timeout=10, request_timeout=WAIT_S)
    assert futures[topic].result(timeout=WAIT_S) is None


def confluent_send(
    bootstrap: str,
    topic: str,
    batches: Sequence[Sequence[SampleRecord]],
    settings: Mapping[str, Any] | None = None,
) -> list[int | None]:
    """Produces each batch, flushes it, and returns the offset of every record.

    With acks=0 librdkafka reports no offset: None.
    """
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS, **dict(settings or {})}
    )
    reports: list[tuple[Any, int | None]] = []

    def on_delivery(error: Any, message: Message) -> None:
        reports.append((error, message.offset()))

    try:
        for batch in batches:
            for record in batch:
                producer.produce(
                    topic,
                    key=record.key,
                    value=record.value,
                    headers=list(record.headers),
                    partition=0,
                    timestamp=record.timestamp_ms,
                    on_delivery=on_delivery,
                )
            assert producer.flush(WAIT_S) == 0
    finally:
        producer.close()
    assert [error for error, _ in reports] == [None] * sum(len(batch) for batch in batches)
    return [offset for _, offset in reports]


@contextlib.contextmanager
def confluent_consumer(bootstrap: str) -> Iterator[Consumer]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka needs a group id even in assign mode; it then sends FindCoordinator.
            "group.id": unique_topic("group"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # ListOffsets shares the connection with the fetcher, and a broker answers one
            # request per connection at a time (as Kafka does): each offsets_for_times call
            # waits out the fetch long poll in progress. A shorter poll keeps the test fast.
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        yield consumer
    finally:
        consumer.close()


def from_confluent(message: Message) -> ConsumedRecord:
    timestamp_type, timestamp = message.timestamp()
    assert timestamp_type == TIMESTAMP_CREATE_TIME
    offset, headers = message.offset(), message.headers()
    assert offset is not None
    assert not isinstance(headers, dict)  # a list of pairs, or None when there are none
    return ConsumedRecord(
        offset,
        message.key(),
        message.value(),
        normalise_headers(headers),
        timestamp,
    )


def confluent_read(consumer: Consumer, count: int) -> list[ConsumedRecord]:
    """Polls until ``count`` records arrived or the deadline passed; returns what arrived."""
    received: list[ConsumedRecord] = []
    deadline = Deadline()
    while len(received) < count and not deadline.expired():
        message = consumer.poll(deadline.poll_timeout_s())
        if message is None:
            continue
        if message.error() is not None:
            raise KafkaException(message.error())
        received.append(from_confluent(message))
    return received


def confluent_read_all(bootstrap: str, topic: str, count: int) -> list[ConsumedRecord]:
    with confluent_consumer(bootstrap) as consumer:
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        return confluent_read(consumer, count)


def confluent_watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    """(earliest, latest) offsets of partition 0, asked of the broker (not cached)."""
    with confluent_consumer(bootstrap) as consumer:
        low, high = consumer.get_watermark_offsets(
            ConfluentTopicPartition(topic, 0), timeout=WAIT_S, cached=False
        )
    return low, high


def confluent_list_offset(admin: AdminClient, topic: str, spec: OffsetSpec) -> tuple[int, int]:
    """(offset, timestamp) that the admin ListOffsets answers for partition 0."""
    tp = ConfluentTopicPartition(topic, 0)
    [future] = admin.list_offsets({tp: spec}, request_timeout=WAIT_S).values()
    answer = future.result(timeout=WAIT_S)
    return answer.offset, answer.timestamp


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip(shared_broker: BrokerProcess, codec: str) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic(f"ck-{codec}")
    # librdkafka, unlike the others, can send null header values and a null key with a null value.
    records = sample_records(RECORD_COUNT, null_header_values=True, null_key_and_value=True)
    admin = confluent_admin(bootstrap)
    confluent_create_topic(admin, topic)
    assert list(admin.list_topics(topic, timeout=WAIT_S).topics[topic].partitions) == [0]
    offsets = confluent_send(bootstrap, topic, halves(records), {"compression.type": codec})
    assert offsets == list(range(RECORD_COUNT))

    with confluent_consumer(bootstrap) as consumer:
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert confluent_read(consumer, RECORD_COUNT) == expected_records(records)
        consumer.seek(ConfluentTopicPartition(topic, 0, MIDDLE_OFFSET))
        from_middle = confluent_read(consumer, RECORD_COUNT - MIDDLE_OFFSET)
        assert from_middle == expected_records(records)[MIDDLE_OFFSET:]

        tp = ConfluentTopicPartition(topic, 0)
        assert consumer.get_watermark_offsets(tp, timeout=WAIT_S, cached=False) == (
            0,
            RECORD_COUNT,
        )
        for timestamp, offset in timestamp_queries():
            query = ConfluentTopicPartition(topic, 0, timestamp)
            [answer] = consumer.offsets_for_times([query], timeout=WAIT_S)
            assert answer.error is None
            assert answer.offset == (-1 if offset is None else offset), timestamp

    # The admin client's ListOffsets, including the max-timestamp spec (KIP-734).
    assert confluent_list_offset(admin, topic, OffsetSpec.earliest())[0] == 0
    assert confluent_list_offset(admin, topic, OffsetSpec.latest())[0] == RECORD_COUNT
    last = RECORD_COUNT - 1
    assert confluent_list_offset(admin, topic, OffsetSpec.max_timestamp()) == (
        last,
        timestamp_of(last),
    )
    for timestamp, offset in timestamp_queries():
        listed, _ = confluent_list_offset(admin, topic, OffsetSpec.for_timestamp(timestamp))
        assert listed == (-1 if offset is None else offset), timestamp


def test_confluent_idempotent_producer(shared_broker: BrokerProcess) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic("ck-idempotent")
    records = sample_records(2 * RECORD_COUNT, null_header_values=True)
    first, second = records[:RECORD_COUNT], records[RECORD_COUNT:]
    idempotent = {"enable.idempotence": True}
    assert confluent_send(bootstrap, topic, halves(first), idempotent) == list(range(RECORD_COUNT))
    offsets = confluent_send(
        bootstrap, topic, halves(second), {**idempotent, "compression.type": "zstd"}
    )
    assert offsets == list(range(RECORD_COUNT, 2 * RECORD_COUNT))
    assert confluent_read_all(bootstrap, topic, len(records)) == expected_records(records)
    assert confluent_watermarks(bootstrap, topic) == (0, len(records))


@pytest.mark.parametrize("acks", [0, 1])
def test_confluent_acks(shared_broker: BrokerProcess, acks: int) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic(f"ck-acks{acks}")
    records = sample_records(RECORD_COUNT, null_header_values=True)
    offsets = confluent_send(bootstrap, topic, halves(records), {"acks": acks})
    if acks == 1:
        assert offsets == list(range(RECORD_COUNT))
    assert confluent_read_all(bootstrap, topic, RECORD_COUNT) == expected_records(records)
    assert confluent_watermarks(bootstrap, topic) == (0, RECORD_COUNT)


def confluent_topic_configs(admin: AdminClient, topic: str) -> dict[str, tuple[str, ConfigSource]]:
    """{name: (value, source)} of every config of ``topic``."""
    [future] = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic)], request_timeout=WAIT_S
    ).values()
    entries = future.result(timeout=WAIT_S)
    return {name: (entry.value, ConfigSource(entry.source)) for name, entry in entries.items()}


def confluent_alter(admin: AdminClient, topic: str, *changes: ConfigEntry) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=list(changes))
    [future] = admin.incremental_alter_configs([resource], request_timeout=WAIT_S).values()
    future.result(timeout=WAIT_S)


def test_confluent_admin_lifecycle(shared_broker: BrokerProcess) -> None:
    bootstrap, topic = shared_broker.bootstrap, unique_topic("ck-admin")
    admin = confluent_admin(bootstrap)
    confluent_create_topic(admin, topic, {"retention.ms": "3600000"})
    configs = confluent_topic_configs(admin, topic)
    assert configs["retention.ms"] == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert configs["cleanup.policy"] == ("delete", ConfigSource.DEFAULT_CONFIG)

    # IncrementalAlterConfigs: SET one key, APPEND to a list, DELETE an override.
    confluent_alter(
        admin,
        topic,
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    )
    configs = confluent_topic_configs(admin, topic)
    assert configs["max.message.bytes"] == ("2000000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert configs["cleanup.policy"] == ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert configs["retention.ms"] == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    confluent_alter(
        admin,
        topic,
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT),
    )
    configs = confluent_topic_configs(admin, topic)
    assert configs["retention.ms"] == (DEFAULT_RETENTION_MS, ConfigSource.DEFAULT_CONFIG)
    assert configs["cleanup.policy"] == ("delete", ConfigSource.DYNAMIC_TOPIC_CONFIG)

    [future] = admin.create_partitions(
        [ConfluentNewPartitions(topic, 3)], operation_timeout=10, request_timeout=WAIT_S
    ).values()
    assert future.result(timeout=WAIT_S) is None
    partitions = admin.list_topics(topic, timeout=WAIT_S).topics[topic].partitions
    assert sorted(partitions) == [0, 1, 2]
    records = sample_records(ADMIN_RECORDS)
    assert confluent_send(bootstrap, topic, [records]) == list(range(ADMIN_RECORDS))

    [future] = admin.delete_records(
        [ConfluentTopicPartition(topic, 0, DELETE_BEFORE)], request_timeout=WAIT_S
    ).values()
    assert future.result(timeout=WAIT_S).low_watermark == DELETE_BEFORE
    assert confluent_watermarks(bootstrap, topic) == (DELETE_BEFORE, ADMIN_RECORDS)
    assert confluent_list_offset(admin, topic, OffsetSpec.earliest())[0] == DELETE_BEFORE
    remaining = confluent_read_all(bootstrap, topic, ADMIN_RECORDS - DELETE_BEFORE)
    assert remaining == expected_records(records)[DELETE_BEFORE:]

    futures = admin.delete_topics([topic], operation_timeout=10, request_timeout=WAIT_S)
    assert futures[topic].result(timeout=WAIT_S) is None
    # describe_topics asks Metadata without auto-creation, so a deleted topic stays deleted.
    [future] = admin.describe_topics(TopicCollection([topic]), request_timeout=WAIT_S).values()
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=WAIT_S)
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_list_all_topics(shared_broker: BrokerProcess) -> None:
    """list_topics() with no topic: librdkafka's Metadata request for every topic.

    librdkafka 2.16 sends it with a 4-byte placeholder where the compact array length
    belongs (confluentinc/librdkafka#5049): one byte of null length, then 3 stray zero
    bytes. Kafka reads the fields it knows and ignores what is left over.
    """
    bootstrap = shared_broker.bootstrap
    kept, deleted = unique_topic("ck-list-kept"), unique_topic("ck-list-deleted")
    admin = confluent_admin(bootstrap)
    confluent_create_topic(admin, kept)
    confluent_create_topic(admin, deleted)
    topics = admin.list_topics(timeout=WAIT_S).topics
    assert {kept, deleted} <= set(topics)
    assert list(topics[kept].partitions) == [0]

    futures = admin.delete_topics([deleted], operation_timeout=10, request_timeout=WAIT_S)
    assert futures[deleted].result(timeout=WAIT_S) is None
    topics = admin.list_topics(timeout=WAIT_S).topics
    assert kept in topics
    assert deleted not in topics


def test_confluent_recreated_topic_has_no_committed_offsets(shared_broker: BrokerProcess) -> None:
    """Deleting a topic drops the groups' offsets of it at once (as Kafka does): a group
    reading a topic recreated under the same name starts by auto.offset.reset, not at
    the positions it had committed in the deleted one."""
    bootstrap = shared_broker.bootstrap
    topic, group = unique_topic("ck-recreated"), unique_topic("ck-recreated-group")
    admin = confluent_admin(bootstrap)
    confluent_create_topic(admin, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[ConfluentTopicPartition(topic, 0, 3)], asynchronous=False)
        futures = admin.delete_topics([topic], operation_timeout=10, request_timeout=WAIT_S)
        assert futures[topic].result(timeout=WAIT_S) is None
        confluent_create_topic(admin, topic)
        [committed] = consumer.committed([ConfluentTopicPartition(topic, 0)], timeout=WAIT_S)
        assert committed.offset == OFFSET_INVALID
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------
# Restart
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_restart_keeps_acknowledged_records(fresh_broker: BrokerProcess, how: str) -> None:
    """Acknowledged means fsynced (flush.messages=1): a SIGTERM or a kill -9 loses nothing.

    The producer opened before the restart keeps going afterwards with its old producer id
    and next sequence numbers, which the broker rebuilt from the log; a new idempotent
    producer gets a fresh id. Offsets continue where they stopped.
    """
    bootstrap, topic = fresh_broker.bootstrap, unique_topic("restart")
    records = sample_records(3 * RECORD_COUNT)
    before, across, after = (
        records[:RECORD_COUNT],
        records[RECORD_COUNT : 2 * RECORD_COUNT],
        records[2 * RECORD_COUNT :],
    )
    with kafka_python_producer(bootstrap, compression_type="snappy") as producer:
        assert kafka_python_send(producer, topic, halves(before)) == list(range(RECORD_COUNT))
        getattr(fresh_broker, how)()
        fresh_broker.start()
        assert kafka_python_read_all(bootstrap, topic, RECORD_COUNT) == expected_records(before)
        assert kafka_python_send(producer, topic, halves(across)) == list(
            range(RECORD_COUNT, 2 * RECORD_COUNT)
        )
    with kafka_python_producer(bootstrap) as producer:
        assert kafka_python_send(producer, topic, halves(after)) == list(
            range(2 * RECORD_COUNT, 3 * RECORD_COUNT)
        )
    assert kafka_python_read_all(bootstrap, topic, len(records)) == expected_records(records)
    assert kafka_python_offsets(bootstrap, topic) == (0, len(records))
