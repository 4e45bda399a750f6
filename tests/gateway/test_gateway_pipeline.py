"""The database synchronisation pipeline (tests/sync/pipeline_scenario.py) with Apache Kafka
behind two gateways with ``--full`` in the broker's place: capture -> gateways -> Kafka ->
Spark apply, the gateway owning ``T.full`` killed with kill -9 mid-stream and started again
while the other goes on serving (every client bootstraps to both), and a destination started
late bootstrapped from ``T.full`` through the gateways while the changes flow. At the end
every destination equals the source. Skipped without the connector jars.

The capture is not killed here: a transaction the capture leaves open is decided by the
broker's review hook (spark_examples/capture/review.py), which the gateways' Kafka does not
run as configured here (the capture warns).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from kshim.testing import GatewayProcess, KafkaProcess
from spark_examples.databases import open_database
from spark_examples.testing import registry_environment
from tests.e2e.test_full_view_spark import spark
from tests.gateway.full_front import GatewayFront
from tests.sync.pipeline_scenario import (
    TOPIC,
    Scenario,
    SessionApplier,
    run_scenario,
)
from tests.sync.spark_marks import SPARK_PIPELINE

__all__ = ["spark"]
pytestmark = SPARK_PIPELINE


class FrontLosingAGateway(GatewayFront):
    """The gateways, of which ``kill`` kills the owner of ``view``-0, as a crash (kill -9),
    and ``start`` starts it again on its port: the other takes the view over (rebuilding it
    from the topic) while the changes flow, and relays for every client meanwhile."""

    def __init__(self, log_dir: Path, upstream: str, view: str) -> None:
        super().__init__(log_dir, upstream)
        self.view = view

    def kill(self) -> None:
        self.view_owner().kill()

    def view_owner(self) -> GatewayProcess:
        """The gateway a Metadata answer names as the leader of ``view``-0."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        metadata = admin.list_topics(self.view, timeout=30)
        topic = metadata.topics[self.view]
        assert 0 in topic.partitions, f"no {self.view}-0 through the gateways: {topic.error}"
        leader = metadata.brokers[topic.partitions[0].leader]
        owners = [gateway for gateway in self.gateways if gateway.port == leader.port]
        assert len(owners) == 1, f"{self.view}-0 led by {leader}, not by a gateway"
        return owners[0]


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The capture registry, in the environment the capture inherits."""
    for name, value in registry_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path / "capture-registry"


def test_late_destination_bootstraps_from_the_full_view_through_the_gateways(
    spark: SparkSession, kafka_upstream: KafkaProcess, tmp_path: Path, registry: Path
) -> None:
    front = FrontLosingAGateway(tmp_path, kafka_upstream.bootstrap, TOPIC + ".full")
    run_scenario(
        SessionApplier(spark),
        tmp_path,
        Scenario(
            source_url=f"sqlite:///{tmp_path}/source.db",
            destinations=[f"sqlite:///{tmp_path}/dest.db"],
            operations=600,
            kill_capture=False,
            late_destination=f"sqlite:///{tmp_path}/late.db",
            seed=13,
            per_second=30,  # 20 s of changes: the kill, the runs and the bootstrap within
        ),
        front,
    )
    late = open_database(f"sqlite:///{tmp_path}/late.db")
    try:  # it only ever read the view
        assert late.execute("SELECT topic FROM kshim_apply_state") == [(TOPIC + ".full",)]
    finally:
        late.close()
