"""A gateway in front of a SASL_SSL listener: it speaks TLS to the cluster and logs in with
its own properties file for itself, while each client's SASL exchange is relayed, so the
cluster authenticates the client (tests/secured_broker.py: kshim's broker with a SASL_SSL
listener and the PLAIN user alice)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from tests.gateway.running_gateway import TIMEOUT_S, RunningGateway
from tests.secured_broker import ALICE_PASSWORD, SecuredBroker, running_secured_broker


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with running_secured_broker(tmp_path_factory.mktemp("gw-secured")) as broker:
        yield broker


def _client(bootstrap: str, password: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",  # to the gateway; TLS beyond it
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
    }


def test_a_client_logs_in_to_the_cluster_through_a_gateway_that_speaks_tls(
    secured: SecuredBroker, tmp_path: Path
) -> None:
    running = RunningGateway(secured.secured, upstream_security=secured.alice())
    topic = f"gw-tls-{uuid.uuid4().hex[:8]}"
    try:
        producer = confluent_kafka.Producer(_client(running.bootstrap, ALICE_PASSWORD))
        for index in range(100):
            producer.produce(topic, b"%d" % index)
        assert producer.flush(TIMEOUT_S) == 0
        consumer = confluent_kafka.Consumer(
            {**_client(running.bootstrap, ALICE_PASSWORD), "group.id": topic,
             "auto.offset.reset": "earliest"}
        )  # fmt: skip
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
        consumer.close()
        assert values == [b"%d" % index for index in range(100)]
        assert set(running.gateway.topology.brokers.values()) == {_address(secured.secured)}
    finally:
        running.stop()


def test_a_wrong_password_is_refused_by_the_cluster(secured: SecuredBroker) -> None:
    running = RunningGateway(secured.secured, upstream_security=secured.alice())
    refused: list[confluent_kafka.KafkaError] = []
    try:
        config = {**_client(running.bootstrap, "wrong"), "error_cb": refused.append}
        producer = confluent_kafka.Producer(config)
        producer.produce("gw-refused", b"x")
        producer.flush(3.0)
        assert any(error.code() == confluent_kafka.KafkaError._AUTHENTICATION for error in refused)
    finally:
        running.stop()


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)
