"""Apache Kafka from Maven Central for the gateway's tests, started once for them all
(skipped with the reason where its jars cannot run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kshim.jvm import artifacts
from kshim.testing import KafkaProcess

# A group's first member starts at once rather than waiting 3 s for others, and a member may
# ask to be declared dead after a second (the delayed-delivery takeover test) rather than
# Kafka's minimum of 6.
GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")


@pytest.fixture(scope="session")
def kafka_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProcess]:
    reason = artifacts.unavailable_reason("kafka")
    if reason is not None:
        pytest.skip(f"no Apache Kafka from Maven Central here: {reason}")
    artifacts.resolve("kafka")
    broker = KafkaProcess(tmp_path_factory.mktemp("gw-kafka") / "kafka", GROUP_SETTINGS).start()
    yield broker
    broker.stop()
