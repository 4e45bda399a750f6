"""The broker's full-data view end-to-end tests (tests/e2e/test_full_view.py), the same
test functions and assertions, through two gateways with ``--full`` in front of Apache
Kafka, the clients bootstrapped to both: confluent-kafka reads the snapshot then streams the
changes, a transaction's records appear on commit only and an aborted one's never, aiokafka
reads the view to its end, and the gateways killed with kill -9 and started again (every
view rebuilt from the cluster) then stopped and started again serve the same exact view.

Not run through a gateway, with why (docs/gateway.md):

- kafka-python's test: it also creates ``X.full`` and expects the broker's refusal; on Kafka
  a gateway relays CreateTopics as it is (a Produce to a view is refused: test_gateway_full.py).
- A view's configs described read-only: the gateway relays DescribeConfigs to the view's
  empty placeholder topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.testing import KafkaProcess
from tests.e2e.test_full_view import (
    test_aiokafka_reads_the_view_to_its_end,
    test_confluent_reads_snapshot_then_streams_changes,
    test_transactions_only_committed_data,
    test_view_survives_kill_and_restart,
)
from tests.gateway.full_front import GatewayFront

__all__ = [
    "test_aiokafka_reads_the_view_to_its_end",
    "test_confluent_reads_snapshot_then_streams_changes",
    "test_transactions_only_committed_data",
    "test_view_survives_kill_and_restart",
]


@pytest.fixture(scope="module")
def shared_broker(
    kafka_upstream: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayFront]:
    front = GatewayFront(tmp_path_factory.mktemp("gw-full-e2e"), kafka_upstream.bootstrap)
    yield front.start()
    front.stop()


@pytest.fixture
def fresh_broker(kafka_upstream: KafkaProcess, tmp_path: Path) -> Iterator[GatewayFront]:
    front = GatewayFront(tmp_path, kafka_upstream.bootstrap).start()
    yield front
    front.stop()
