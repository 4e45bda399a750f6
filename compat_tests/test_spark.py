"""The Java client (kafka-clients 3.9), through Spark 4.0's stock Kafka connector.

The sink is an idempotent Java producer (InitProducerId v5, Produce v11); a batch read
resolves earliest/latest with ListOffsets on the executors, then fetches (docs/protocol-notes.md
§2). One JVM serves the whole module, whatever the broker. Skips with the reason when the
connector jars or Java are missing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.clients import COMMITTED_OFFSETS, TRANSACTION_STEPS, text_records
from compat_tests.deviations import (
    TANSU_ABORTED_TRANSACTIONS,
    TANSU_LATEST_OFFSET,
    TANSU_TIMESTAMP_LOOKUP,
    deviates,
)
from compat_tests.support import (
    RECORD_COUNT,
    create_topic,
    halves,
    reference,
    require_transactions,
)
from spark_examples.spark_session import connector_unavailable_reason
from tests.e2e.client_helpers import timestamp_of

UNAVAILABLE = connector_unavailable_reason()

pytestmark = [
    pytest.mark.client_java,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]

# Executors poll for up to spark.network.timeout (120 s) by default; a broker that answers
# Fetch with nothing should fail the scenario in seconds.
POLL_TIMEOUT_MS = "15000"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from spark_examples.spark_session import kafka_spark_session

    session = kafka_spark_session("kshim-compat")
    yield session
    session.stop()


def read_rows(spark: Any, broker: BrokerUnderTest, topic: str, **options: str) -> list[Any]:
    """A batch read of the whole topic: (offset, key, value, timestamp ms) per row."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    frame = reader.load().selectExpr(
        "offset", "key", "value", "unix_millis(timestamp) AS timestamp_ms"
    )
    rows = frame.collect()
    return sorted(
        (
            row["offset"],
            None if row["key"] is None else bytes(row["key"]),
            None if row["value"] is None else bytes(row["value"]),
            row["timestamp_ms"],
        )
        for row in rows
    )


@pytest.mark.compat_smoke
@pytest.mark.producer_idempotent
@pytest.mark.headers
def test_java_idempotent_producer(spark: Any, broker: BrokerUnderTest) -> None:
    """Spark's sink writes rows in order (one task, one producer); headers included."""
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    topic = create_topic(broker, "java-sink")
    header = StructType(
        [StructField("key", StringType(), False), StructField("value", BinaryType(), True)]
    )
    schema = StructType(
        [
            StructField("key", BinaryType(), True),
            StructField("value", BinaryType(), True),
            StructField("headers", ArrayType(header), True),
        ]
    )
    rows: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]] = [
        (f"key-{index}".encode(), f"value-{index}".encode(), [("index", str(index).encode())])
        for index in range(RECORD_COUNT)
    ]
    rows[3] = (None, b"no key", [])

    (
        spark.createDataFrame(rows, schema)
        .coalesce(1)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .save()
    )

    consumed = reference().consume(broker.bootstrap, topic, RECORD_COUNT)
    assert [(r.offset, r.key, r.value, r.headers) for r in consumed] == [
        (offset, key, value, tuple(headers)) for offset, (key, value, headers) in enumerate(rows)
    ]


@pytest.mark.compat_smoke
@pytest.mark.consumer_assign
@deviates(TANSU_LATEST_OFFSET)
def test_java_batch_read(spark: Any, broker: BrokerUnderTest) -> None:
    """earliest to latest over two multi-record batches: every record, once."""
    topic = create_topic(broker, "java-read")
    records = text_records(RECORD_COUNT)
    assert reference().produce(broker.bootstrap, topic, halves(records)) == list(
        range(RECORD_COUNT)
    )

    rows = read_rows(spark, broker, topic, startingOffsets="earliest", endingOffsets="latest")

    assert rows == [(offset, r.key, r.value, r.timestamp_ms) for offset, r in enumerate(records)]


@pytest.mark.timestamps
@deviates(TANSU_TIMESTAMP_LOOKUP)
def test_java_read_from_a_timestamp(spark: Any, broker: BrokerUnderTest) -> None:
    """startingTimestamp: one ListOffsets by timestamp on the driver (Admin.listOffsets)."""
    topic = create_topic(broker, "java-timestamp")
    records = text_records(RECORD_COUNT)
    assert reference().produce(broker.bootstrap, topic, [records]) == list(range(RECORD_COUNT))
    start = 7

    rows = read_rows(spark, broker, topic, startingTimestamp=str(timestamp_of(start) - 1))

    assert [row[0] for row in rows] == list(range(start, RECORD_COUNT))


@pytest.mark.read_committed
@deviates(TANSU_ABORTED_TRANSACTIONS)
def test_java_read_committed(spark: Any, broker: BrokerUnderTest) -> None:
    """kafka.isolation.level=read_committed: aborted records are skipped, markers too."""
    require_transactions(broker)
    topic = create_topic(broker, "java-rc")
    records = text_records(sum(count for _, count in TRANSACTION_STEPS))
    reference().produce_transactions(
        broker.bootstrap, topic, records, f"compat-java-rc-{uuid.uuid4().hex[:8]}"
    )

    rows = read_rows(spark, broker, topic, **{"kafka.isolation.level": "read_committed"})

    assert [row[0] for row in rows] == list(COMMITTED_OFFSETS)
    assert [row[2] for row in rows] == [records[index].value for index in (0, 1, 2, 5)]
