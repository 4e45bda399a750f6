"""Spark's stock Kafka connector reads ``T.full`` in batch mode: exactly the live keys.

The view ends with a keyless record (a gap up to the high watermark), which the
connector must cross without stalling. Skipped without the connector jars.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from kshim.testing import BrokerProcess
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session
from tests.e2e.client_helpers import unique_topic
from tests.e2e.test_full_view import create_topic, produce, read_view

UNAVAILABLE = connector_unavailable_reason()

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]
POLL_TIMEOUT_MS = "20000"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = kafka_spark_session("kshim-e2e-full-view")
    yield session
    session.stop()


def test_batch_read_of_the_view_returns_the_live_keys(
    spark: SparkSession, shared_broker: BrokerProcess
) -> None:
    topic = unique_topic("spark-full")
    create_topic(shared_broker.bootstrap, topic)
    writes = [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"b", b"2"), (b"a", b"2"), (b"b", b"3")]
    tail = [(b"a", b"3"), (b"a", b"4"), (None, b"keyless")]  # offset 8: not in the view
    produce(shared_broker.bootstrap, topic, [*writes, *tail])
    expected = {b"c": (2, b"1"), b"b": (5, b"3"), b"a": (7, b"4")}
    assert read_view(shared_broker.bootstrap, topic) == expected  # the view has caught up
    assert batch_read_view(spark, shared_broker.bootstrap, topic) == expected


def batch_read_view(
    spark: SparkSession, bootstrap: str, topic: str
) -> dict[bytes, tuple[int, bytes]]:
    """``topic``.full read by Spark's connector in one batch: key -> (offset, value)."""
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic + ".full")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
        .load()
        .collect()
    )
    return {bytes(row["key"]): (row["offset"], bytes(row["value"])) for row in rows}


def _apply_batch(table: dict[bytes, bytes], rows: list[object]) -> None:
    """The sink a new replica would run: offsets in order, a null value deletes the key."""
    for row in sorted(rows, key=lambda row: row["offset"]):  # type: ignore[index]
        key, value = bytes(row["key"]), row["value"]  # type: ignore[index]
        if value is None:
            table.pop(key, None)
        else:
            table[key] = bytes(value)


def test_stream_from_earliest_gets_the_snapshot_then_every_change(
    spark: SparkSession, shared_broker: BrokerProcess, tmp_path: object
) -> None:
    topic = unique_topic("spark-full-stream")
    create_topic(shared_broker.bootstrap, topic)
    source: dict[bytes, bytes] = {}

    def write(writes: list[tuple[bytes, bytes | None]]) -> None:
        produce(shared_broker.bootstrap, topic, writes)
        for key, value in writes:
            if value is None:
                source.pop(key, None)
            else:
                source[key] = value
        # The view has caught up before Spark reads it; tombstones stay until they expire.
        view = read_view(shared_broker.bootstrap, topic)
        assert {key: value for key, (_, value) in view.items() if value is not None} == source

    table: dict[bytes, bytes] = {}
    checkpoint = str(tmp_path) + "/checkpoint"

    def run_available_now() -> None:
        stream = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", shared_broker.bootstrap)
            .option("subscribe", topic + ".full")
            .option("startingOffsets", "earliest")
            .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
            .load()
        )
        query = (
            stream.writeStream.foreachBatch(lambda frame, _: _apply_batch(table, frame.collect()))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    write([(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"a", b"2")])
    run_available_now()
    assert table == source == {b"a": b"2", b"b": b"1", b"c": b"1"}

    write([(b"b", b"2"), (b"c", None), (b"d", b"1")])  # update, delete, insert
    run_available_now()
    assert table == source == {b"a": b"2", b"b": b"2", b"d": b"1"}
