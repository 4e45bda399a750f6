"""Apache Kafka from Maven Central for the gateway's tests, started once for them all
(skipped with the reason where its jars cannot run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kshim.jvm import artifacts
from kshim.testing import KafkaProcess


@pytest.fixture(scope="session")
def kafka_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProcess]:
    reason = artifacts.unavailable_reason("kafka")
    if reason is not None:
        pytest.skip(f"no Apache Kafka from Maven Central here: {reason}")
    artifacts.resolve("kafka")
    broker = KafkaProcess(tmp_path_factory.mktemp("gw-kafka") / "kafka").start()
    yield broker
    broker.stop()
