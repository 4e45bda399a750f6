"""Spark's stock Kafka connector reading ``T.full`` through two gateways with ``--full`` in
front of Apache Kafka: the broker's own tests (tests/e2e/test_full_view_spark.py), a batch
read of exactly the live keys, and a stream from earliest that gets the snapshot then every
change, run with the gateways in the broker's place. Skipped without the connector jars."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from kshim.testing import KafkaProcess
from tests.e2e.client_helpers import unique_topic
from tests.e2e.test_full_view import create_topic, produce
from tests.e2e.test_full_view_spark import (
    UNAVAILABLE,
    batch_read_view,
    spark,
    test_batch_read_of_the_view_returns_the_live_keys,
    test_stream_from_earliest_gets_the_snapshot_then_every_change,
)
from tests.gateway.full_front import GatewayFront

__all__ = [
    "spark",
    "test_batch_read_of_the_view_returns_the_live_keys",
    "test_stream_from_earliest_gets_the_snapshot_then_every_change",
]
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def shared_broker(
    kafka_upstream: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayFront]:
    front = GatewayFront(tmp_path_factory.mktemp("gw-full-spark"), kafka_upstream.bootstrap)
    yield front.start()
    front.stop()


def test_spark_reads_a_view_no_client_named_before(
    spark: SparkSession, shared_broker: GatewayFront
) -> None:
    """Spark's connector is the first to name the view: its admin client must find it (the
    gateway offers no DescribeTopicPartitions, so it asks Metadata, which makes the view)."""
    topic = unique_topic("spark-full-first")
    create_topic(shared_broker.bootstrap, topic)
    produce(shared_broker.bootstrap, topic, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")])
    assert batch_read_view(spark, shared_broker.bootstrap, topic) == {
        b"b": (1, b"1"),
        b"a": (2, b"2"),
    }
