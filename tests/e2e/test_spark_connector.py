"""Spark's stock Kafka connector (kafka-clients 3.9 inside) against a real ``kshim serve``.

What each test exercises on the wire (docs/protocol-notes.md §2.3-§2.5): batch reads resolve
earliest/latest on the executors (ListOffsets -2/-1 after every poll, then Fetch); timestamp
reads add one ListOffsets by timestamp on the driver; the sink is an idempotent producer
(InitProducerId, then Produce with sequences); streaming asks ListOffsets -1 every trigger.
Records are written and read back with kafka-python in assign mode, never through groups,
so that a read is the connector's own. Skips with the reason without Java or the jars.
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from kshim.testing import BrokerProcess
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session

with warnings.catch_warnings():
    # kafka-python 3.0.12 loads its message schemas at import time with
    # importlib.resources.read_text, deprecated in Python 3.11; the warning is attributed
    # to importlib, so the project's "ignore kafka.*" filter misses it.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

UNAVAILABLE = connector_unavailable_reason()

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]

CLIENT_TIMEOUT_MS = 15_000
CLIENT_TIMEOUT_S = CLIENT_TIMEOUT_MS / 1000
STREAM_TIMEOUT_S = 120.0
# Executors poll for up to spark.network.timeout (120 s) by default; a broker that answers
# Fetch with nothing should fail the test in seconds, not minutes.
POLL_TIMEOUT_MS = "20000"

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One record as produced or as read back, in the shape every test compares."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_ms: int | None = None


@dataclass(slots=True)
class Outgoing:
    partition: int
    key: bytes | None
    value: bytes
    headers: list[Header] = field(default_factory=list)
    timestamp_ms: int | None = None


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS)
    try:
        response = admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=10_000)
    finally:
        admin.close()
    assert [topic["error_code"] for topic in response["topics"]] == [0]


def produce(bootstrap: str, topic: str, records: list[Outgoing]) -> list[KafkaRecord]:
    """Sends each record to its partition, one at a time; returns them with their offsets."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS)
    stored = []
    try:
        for record in records:
            metadata = producer.send(
                topic,
                key=record.key,
                value=record.value,
                headers=record.headers,
                partition=record.partition,
                timestamp_ms=record.timestamp_ms,
            ).get(timeout=CLIENT_TIMEOUT_S)
            stored.append(
                KafkaRecord(
                    metadata.partition,
                    metadata.offset,
                    record.key,
                    record.value,
                    tuple(record.headers),
                    metadata.timestamp,
                )
            )
    finally:
        producer.close(timeout=CLIENT_TIMEOUT_S)
    return stored


def consume_all(bootstrap: str, topic: str) -> list[KafkaRecord]:
    """Reads every partition from its start to its end offset (assign mode, no group)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        assigned = [TopicPartition(topic, partition) for partition in sorted(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        end_offsets = consumer.end_offsets(assigned)
        records: list[KafkaRecord] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while any(consumer.position(tp) < end_offsets[tp] for tp in assigned):
            assert time.monotonic() < deadline, f"read {len(records)} records, then stalled"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(
                    KafkaRecord(
                        message.partition,
                        message.offset,
                        message.key,
                        message.value,
                        tuple(message.headers),
                        message.timestamp,
                    )
                    for message in batch
                )
    finally:
        consumer.close()
    return records


def keyed_records(count: int, partitions: int) -> list[Outgoing]:
    """Round-robin over partitions, with two headers per record (one repeated name)."""
    return [
        Outgoing(
            partition=index % partitions,
            key=f"key-{index}".encode(),
            value=f"value-{index}".encode(),
            headers=[("source", b"kafka-python"), ("index", str(index).encode())],
        )
        for index in range(count)
    ]


def rows_as_records(rows: list[Row]) -> list[KafkaRecord]:
    """Spark rows (binary key/value, headers array) as records, sorted by partition/offset."""
    return sorted(
        (
            KafkaRecord(
                row["partition"],
                row["offset"],
                None if row["key"] is None else bytes(row["key"]),
                None if row["value"] is None else bytes(row["value"]),
                tuple(
                    (header["key"], None if header["value"] is None else bytes(header["value"]))
                    for header in row["headers"] or ()
                ),
            )
            for row in rows
        ),
        key=lambda record: (record.partition, record.offset),
    )


def without_timestamps(records: list[KafkaRecord]) -> list[KafkaRecord]:
    return sorted(
        (
            KafkaRecord(record.partition, record.offset, record.key, record.value, record.headers)
            for record in records
        ),
        key=lambda record: (record.partition, record.offset),
    )


def kafka_reader(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One JVM for the whole module: starting Spark costs several seconds."""
    session = kafka_spark_session("kshim-e2e-spark-connector")
    yield session
    session.stop()


@pytest.mark.parametrize("partitions", [1, 3])
def test_batch_read_returns_every_record_with_headers(
    spark: SparkSession, shared_broker: BrokerProcess, partitions: int
) -> None:
    topic = unique_topic(f"spark-batch-{partitions}p")
    create_topic(shared_broker.bootstrap, topic, partitions)
    produced = produce(shared_broker.bootstrap, topic, keyed_records(12, partitions))

    rows = kafka_reader(
        spark,
        shared_broker.bootstrap,
        topic,
        startingOffsets="earliest",
        endingOffsets="latest",
    ).collect()

    assert rows_as_records(rows) == without_timestamps(produced)
    assert {row["topic"] for row in rows} == {topic}
    for partition in range(partitions):
        offsets = [record.offset for record in produced if record.partition == partition]
        assert offsets == list(range(len(offsets)))


def test_batch_read_of_an_explicit_offset_range(
    spark: SparkSession, shared_broker: BrokerProcess
) -> None:
    topic = unique_topic("spark-range")
    create_topic(shared_broker.bootstrap, topic, 1)
    produced = produce(shared_broker.bootstrap, topic, keyed_records(10, 1))

    rows = kafka_reader(
        spark,
        shared_broker.bootstrap,
        topic,
        startingOffsets=f'{{"{topic}":{{"0":3}}}}',
        endingOffsets=f'{{"{topic}":{{"0":7}}}}',
    ).collect()

    assert [record.offset for record in rows_as_records(rows)] == [3, 4, 5, 6]
    assert rows_as_records(rows) == without_timestamps(produced)[3:7]


def test_batch_read_from_a_starting_timestamp(
    spark: SparkSession, shared_broker: BrokerProcess
) -> None:
    topic = unique_topic("spark-timestamp")
    create_topic(shared_broker.bootstrap, topic, 1)
    base_ms = (int(time.time() * 1000) // 1000 - 3600) * 1000
    outgoing = keyed_records(10, 1)
    for index, record in enumerate(outgoing):
        record.timestamp_ms = base_ms + index * 1000
    produced = produce(shared_broker.bootstrap, topic, outgoing)
    assert [record.timestamp_ms for record in produced] == [base_ms + i * 1000 for i in range(10)]

    def read_from(timestamp_ms: int) -> list[tuple[int, int]]:
        frame = kafka_reader(
            spark, shared_broker.bootstrap, topic, startingTimestamp=str(timestamp_ms)
        )
        rows = frame.selectExpr("offset", "unix_millis(timestamp) AS timestamp_ms").collect()
        return sorted((row["offset"], row["timestamp_ms"]) for row in rows)

    # Exactly on a record's timestamp: that record is the first one returned.
    assert read_from(base_ms + 4000) == [(i, base_ms + i * 1000) for i in range(4, 10)]
    # Between two records: the first record after it.
    assert read_from(base_ms + 6500) == [(i, base_ms + i * 1000) for i in range(7, 10)]
    # Before everything: the whole partition.
    assert read_from(base_ms - 1) == [(i, base_ms + i * 1000) for i in range(10)]


SINK_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), nullable=True),
        StructField("value", BinaryType(), nullable=True),
        StructField(
            "headers",
            ArrayType(
                StructType(
                    [
                        StructField("key", StringType(), nullable=False),
                        StructField("value", BinaryType(), nullable=True),
                    ]
                )
            ),
            nullable=True,
        ),
    ]
)


def test_sink_writes_rows_in_order_to_an_auto_created_topic(
    spark: SparkSession, shared_broker: BrokerProcess
) -> None:
    topic = unique_topic("spark-sink")
    rows: list[tuple[bytes | None, bytes, list[Header]]] = [
        (f"key-{index}".encode(), f"value-{index}".encode(), [("index", str(index).encode())])
        for index in range(20)
    ]
    rows.append((None, b"no key, no headers", []))
    rows.append((b"two-headers", b"value", [("a", b"1"), ("b", None)]))
    frame = spark.createDataFrame(rows, SINK_SCHEMA)

    # One Spark partition, so one task and one producer: Kafka order is then row order.
    (
        frame.coalesce(1)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", shared_broker.bootstrap)
        .option("topic", topic)
        .save()
    )

    expected = [
        KafkaRecord(0, offset, key, value, tuple(headers))
        for offset, (key, value, headers) in enumerate(rows)
    ]
    assert without_timestamps(consume_all(shared_broker.bootstrap, topic)) == expected


def test_streaming_available_now_delivers_each_record_once(
    spark: SparkSession, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique_topic("spark-stream")
    create_topic(shared_broker.bootstrap, topic, 3)
    checkpoint = tmp_path / "checkpoint"
    first = produce(shared_broker.bootstrap, topic, keyed_records(15, 3))

    batches = run_available_now(spark, shared_broker.bootstrap, topic, checkpoint)
    # maxOffsetsPerTrigger=4 splits 15 records into several micro-batches.
    assert len(batches) >= 4
    assert sorted_records(batches) == without_timestamps(first)

    more = keyed_records(21, 3)[15:]
    second = produce(shared_broker.bootstrap, topic, more)
    # A restart from the checkpoint delivers only what arrived since.
    batches = run_available_now(spark, shared_broker.bootstrap, topic, checkpoint)
    assert sorted_records(batches) == without_timestamps(second)


def sorted_records(batches: list[list[Row]]) -> list[KafkaRecord]:
    """All rows of all micro-batches; duplicates survive (the caller compares to a list)."""
    return rows_as_records([row for batch in batches for row in batch])


def run_available_now(
    spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path
) -> list[list[Row]]:
    """Runs one availableNow query to completion; returns the rows of each micro-batch."""
    batches: list[list[Row]] = []

    def collect_batch(frame: DataFrame, batch_id: int) -> None:
        del batch_id
        batches.append(frame.collect())

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "4")
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
        .load()
    )
    query: Any = (
        stream.writeStream.foreachBatch(collect_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(STREAM_TIMEOUT_S)
    finally:
        query.stop()
    assert finished, f"streaming query still running after {STREAM_TIMEOUT_S} s"
    assert query.exception() is None
    return [batch for batch in batches if batch]
