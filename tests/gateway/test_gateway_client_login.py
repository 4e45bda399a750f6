"""SASL terminated at the gateway (kshim/gateway/client_login.py): clients log in to
``kshim gateway --listener-security SASL_PLAINTEXT`` with the gateway's users (SCRAM from
its data directory, PLAIN from its listener's JAAS setting), whatever the cluster behind it
asks; the gateway logs in to the cluster as itself.

Against the real Apache Kafka from Maven Central, which asks nothing (a PLAINTEXT listener,
so a client's SASL relayed to it would be refused), and against kshim's broker on a SASL_SSL
listener that knows only the PLAIN user alice, the gateway's own login (so its users are
not the cluster's)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import kafka
import pytest

from kshim.client.frames import encode_request
from kshim.client.sasl import AuthenticationFailed
from kshim.client.wire import WireConnection
from kshim.testing import GatewayProcess, KafkaProcess
from tests.cli_runs import run_kshim
from tests.secured_broker import ALICE_PASSWORD, SecuredBroker, running_secured_broker

TIMEOUT_S = 30.0
CAROL, CAROL_PASSWORD = "carol", "carol-secret"  # SCRAM-SHA-256, in the gateway's store
BOB, BOB_PASSWORD = "bob", "bob-secret"  # PLAIN, in the gateway's listener's JAAS setting
PLAIN_JAAS = (
    f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{BOB}="{BOB_PASSWORD}";'
)
FAILED_DELAY_S = 0.1  # connection.failed.authentication.delay.ms, Kafka's default
METADATA = (3, 1)


def _add_user(data_dir: Path, name: str, password: str, *target: str) -> None:
    password_file = data_dir.parent / f"{name}-password"
    password_file.write_text(password)
    added = run_kshim(
        "users", "add", name, "--mechanism", "SCRAM-SHA-256",
        "--password-file", str(password_file), *target,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr


def _terminating(
    work: Path, upstream: str, *options: str, listener: str = "SASL_PLAINTEXT"
) -> GatewayProcess:
    """A gateway terminating SASL with carol stored in its data directory."""
    data_dir = work / "gateway-data"
    _add_user(data_dir, CAROL, CAROL_PASSWORD, "--data-dir", str(data_dir))
    jaas_key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
    process = GatewayProcess(
        work,
        upstream,
        options=[
            "--listener-security", listener, "--data-dir", str(data_dir),
            "--set", "sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN",
            "--set", f"{jaas_key}={PLAIN_JAAS}",
            *options,
        ],
    )  # fmt: skip
    process.start()
    return process


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gw-login")


@pytest.fixture(scope="module")
def gateway(kafka_upstream: KafkaProcess, work: Path) -> Iterator[GatewayProcess]:
    process = _terminating(work, kafka_upstream.bootstrap)
    yield process
    process.stop()


def _confluent(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _produce_and_consume(settings: dict[str, object], topic: str, count: int) -> list[bytes]:
    producer = confluent_kafka.Producer(settings)
    for index in range(count):
        producer.produce(topic, b"%d" % index)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = confluent_kafka.Consumer(
        {**settings, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value() or b"")
    consumer.close()
    return values


def test_clients_log_in_with_the_gateways_users(gateway: GatewayProcess) -> None:
    topic = f"gw-login-{uuid.uuid4().hex[:8]}"
    carol = _confluent(gateway.bootstrap, "SCRAM-SHA-256", CAROL, CAROL_PASSWORD)
    assert _produce_and_consume(carol, topic, 100) == [b"%d" % index for index in range(100)]
    bob = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=gateway.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=BOB,
        sasl_plain_password=BOB_PASSWORD,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(TIMEOUT_S * 1000),
    )
    read: list[bytes] = []
    try:
        for record in bob:  # until all are read, or no record for TIMEOUT_S
            read.append(record.value)
            if len(read) == 100:
                break
    finally:
        bob.close()
    assert read == [b"%d" % index for index in range(100)]


def test_a_wrong_password_is_refused_after_the_delay_and_the_connection_closed(
    gateway: GatewayProcess,
) -> None:
    host, port = gateway.bootstrap.rsplit(":", 1)
    with WireConnection(host, int(port), TIMEOUT_S) as connection:
        started = time.monotonic()
        with pytest.raises(AuthenticationFailed, match="SASL_AUTHENTICATION_FAILED"):
            connection.authenticate("SCRAM-SHA-256", CAROL, "not-her-password")
        assert time.monotonic() - started >= FAILED_DELAY_S
        assert connection.wait_closed(TIMEOUT_S) == b""
    with WireConnection(host, int(port), TIMEOUT_S) as connection:  # still serving
        connection.authenticate("PLAIN", BOB, BOB_PASSWORD)
        assert connection.call(*METADATA, {"topics": []}).brokers


def test_nothing_but_apiversions_and_the_login_before_it(gateway: GatewayProcess) -> None:
    host, port = gateway.bootstrap.rsplit(":", 1)
    with WireConnection(host, int(port), TIMEOUT_S) as connection:
        versions = {"client_software_name": "kshim-tests", "client_software_version": "1"}
        assert connection.call(18, 3, versions).error_code == 0  # ApiVersions: relayed
        # A Metadata request, as a client that skipped its login would send it.
        connection.send(encode_request(*METADATA, connection.next_correlation_id(), {"topics": []}))
        assert connection.wait_closed(TIMEOUT_S) == b""


def test_raw_tokens_after_saslhandshake_v0(gateway: GatewayProcess) -> None:
    """KIP-152's v0 form: the PLAIN token as a bare frame, answered by a bare frame."""
    host, port = gateway.bootstrap.rsplit(":", 1)
    token = b"\0" + BOB.encode() + b"\0" + BOB_PASSWORD.encode()
    with WireConnection(host, int(port), TIMEOUT_S) as connection:
        assert connection.call(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        connection.send(len(token).to_bytes(4, "big") + token)
        assert connection.read_frame() == b""  # PLAIN's server answer: an empty token
        assert connection.call(*METADATA, {"topics": []}).brokers
    wrong = b"\0" + BOB.encode() + b"\0wrong"
    with WireConnection(host, int(port), TIMEOUT_S) as connection:
        assert connection.call(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        connection.send(len(wrong).to_bytes(4, "big") + wrong)
        assert connection.wait_closed(TIMEOUT_S) == b""  # no answer in the raw form


def test_users_are_managed_through_the_gateway_and_its_directory_is_locked(
    gateway: GatewayProcess, work: Path, tmp_path: Path
) -> None:
    config = tmp_path / "carol.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.username={CAROL}\nsasl.password={CAROL_PASSWORD}\n"
    )
    through = ("--bootstrap", gateway.bootstrap, "--command-config", str(config))
    _add_user(tmp_path / "unused", "dave", "dave-secret", *through)
    listed = run_kshim("users", "list", *through)
    assert listed.returncode == 0, listed.stderr
    assert {"carol", "dave"} <= {line.split()[0] for line in listed.stdout.splitlines()[1:]}
    host, port = gateway.bootstrap.rsplit(":", 1)
    with WireConnection(host, int(port), TIMEOUT_S) as connection:
        connection.authenticate("SCRAM-SHA-256", "dave", "dave-secret")
        assert connection.call(*METADATA, {"topics": []}).brokers
    data_dir = work / "gateway-data"
    (tmp_path / "erin-password").write_text("erin-secret")
    offline = run_kshim(
        "users", "add", "erin", "--mechanism", "SCRAM-SHA-256",
        "--password-file", str(tmp_path / "erin-password"), "--data-dir", str(data_dir),
    )  # fmt: skip
    assert offline.returncode != 0 and "stop it first" in offline.stderr


def test_the_gateway_logs_in_to_a_secured_cluster_as_itself(tmp_path: Path) -> None:
    (tmp_path / "cluster").mkdir()
    with running_secured_broker(tmp_path / "cluster") as cluster:
        upstream_config = _alice_properties(cluster, tmp_path / "upstream.properties")
        process = _terminating(tmp_path, cluster.secured, "--upstream-config", str(upstream_config))
        try:
            topic = f"gw-login-tls-{uuid.uuid4().hex[:8]}"
            carol = _confluent(process.bootstrap, "SCRAM-SHA-256", CAROL, CAROL_PASSWORD)
            values = _produce_and_consume(carol, topic, 50)
            assert values == [b"%d" % index for index in range(50)]
            # carol is the gateway's user only: the cluster refuses her.
            host, port = cluster.secured.rsplit(":", 1)
            with pytest.raises(AuthenticationFailed):
                WireConnection(
                    host,
                    int(port),
                    TIMEOUT_S,
                    security=cluster.security("SCRAM-SHA-256", CAROL, CAROL_PASSWORD),
                )
        finally:
            process.stop()


def _alice_properties(cluster: SecuredBroker, path: Path) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"sasl.username=alice\nsasl.password={ALICE_PASSWORD}\n"
        f"ssl.ca.location={cluster.ca_file}\n"
    )
    return path
