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

from kshim.testing import GatewayProcess
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


def test_security_on_both_sides_of_the_command(secured: SecuredBroker, tmp_path: Path) -> None:
    """``kshim gateway --listener-security SSL --upstream-config FILE``: the client speaks
    SASL_SSL to the gateway, which speaks TLS to the cluster and relays the client's login."""
    upstream_config = tmp_path / "upstream.properties"
    upstream_config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
        f"sasl.password={ALICE_PASSWORD}\nssl.ca.location={secured.ca_file}\n"
    )
    keystore = secured.ca_file.parent / "broker.pem"  # issued for 127.0.0.1 by the same CA
    options = ["--upstream-config", str(upstream_config), "--listener-security", "SSL"]
    options += ["--set", f"ssl.keystore.location={keystore}"]
    gateway = GatewayProcess(tmp_path, secured.secured, options=options).start()
    try:
        client = {**_client(gateway.bootstrap, ALICE_PASSWORD), "security.protocol": "SASL_SSL",
                  "ssl.ca.location": str(secured.ca_file)}  # fmt: skip
        producer = confluent_kafka.Producer(client)
        producer.produce("gw-both-sides", b"over TLS twice")
        assert producer.flush(TIMEOUT_S) == 0
        plain = confluent_kafka.Producer({**client, "security.protocol": "SASL_PLAINTEXT"})
        plain.produce("gw-both-sides", b"refused")
        assert plain.flush(3.0) == 1  # a plaintext client gets no answer from a TLS port
    finally:
        gateway.stop()
    assert "Traceback" not in gateway.log_text()
