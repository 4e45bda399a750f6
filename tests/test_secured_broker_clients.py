"""kshim's own clients against a kshim broker with a SASL_SSL listener (tests/secured_broker.py):
``kshim.client.wire`` and the commands (``kshim topics``, ``tail``, ``groups``, ``transactions``)
given a Kafka client properties file, over TLS with PLAIN and SCRAM users.

Every wait is bounded; only processes started here are signalled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kshim.client.sasl import AuthenticationFailed
from kshim.client.security import client_security
from kshim.client.wire import connect
from tests.cli_runs import run_kshim
from tests.secured_broker import (
    ALICE_PASSWORD,
    SCRAM_MECHANISMS,
    SecuredBroker,
    running_secured_broker,
)

pytestmark = pytest.mark.timeout(300)

COMMAND_TIMEOUT_S = 60.0
METADATA = (3, 12)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with running_secured_broker(tmp_path_factory.mktemp("secured")) as running:
        yield running


def unique(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def succeeded(*arguments: str) -> list[str]:
    result = run_kshim(*arguments)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout.splitlines()


def config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / f"{unique('client')}.properties"
    path.write_text(text, encoding="utf-8")
    return os.fspath(path)


def test_wire_client_authenticates_with_plain_over_tls(broker: SecuredBroker) -> None:
    with connect(broker.secured, 10.0, security=broker.alice()) as connection:
        metadata = connection.call(*METADATA, {"topics": None})
    # The broker advertises the listener the request came in on.
    assert [f"{b.host}:{b.port}" for b in metadata.brokers] == [broker.secured]
    wrong = broker.security("PLAIN", "alice", "not-" + ALICE_PASSWORD)
    with pytest.raises(AuthenticationFailed, match="PLAIN authentication as alice: SASL_AUTH"):
        connect(broker.secured, 10.0, security=wrong)


@pytest.mark.parametrize("mechanism", sorted(SCRAM_MECHANISMS))
def test_scram_users_made_through_the_api_authenticate(
    broker: SecuredBroker, mechanism: str
) -> None:
    user = unique("bob")
    broker.add_scram_user(mechanism, user, "bob-secret")
    with connect(broker.secured, 10.0, security=broker.security(mechanism, user, "bob-secret")):
        pass
    wrong = broker.security(mechanism, user, "not-bob-secret")
    with pytest.raises(AuthenticationFailed, match=f"{mechanism} authentication as {user}: SASL"):
        connect(broker.secured, 10.0, security=wrong)


def test_the_brokers_certificate_must_name_the_host_unless_told_otherwise(
    broker: SecuredBroker,
) -> None:
    by_name = "localhost:" + broker.secured.rpartition(":")[2]  # the certificate names 127.0.0.1
    with pytest.raises(OSError, match="Hostname mismatch"):
        connect(by_name, 10.0, security=broker.alice())
    unchecked = client_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": ALICE_PASSWORD,
            "ssl.ca.location": str(broker.ca_file),
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    with connect(by_name, 10.0, security=unchecked):
        pass


def test_topics_with_a_java_client_properties_file(broker: SecuredBroker, tmp_path: Path) -> None:
    config = config_file(tmp_path, broker.java_properties("PLAIN", "alice", ALICE_PASSWORD))
    topic = unique("secured")
    options = ("--bootstrap", broker.secured, "--command-config", config)
    succeeded("topics", "create", *options, "--topic", topic, "--partitions", "2")
    listed = succeeded("topics", "list", *options)
    assert any(line.split()[:2] == [topic, "2"] for line in listed), listed


def test_tail_with_a_librdkafka_properties_file(broker: SecuredBroker, tmp_path: Path) -> None:
    topic = unique("tailed")
    producer = Producer({"bootstrap.servers": broker.plaintext})
    for number in range(3):
        producer.produce(topic, f"value-{number}".encode(), f"key-{number}".encode())
    assert producer.flush(30.0) == 0
    config = config_file(
        tmp_path,
        "security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\nsasl.username=alice\n"
        f"sasl.password={ALICE_PASSWORD}\nssl.ca.location={broker.ca_file}\n",
    )
    lines = succeeded(
        "tail", topic, "--bootstrap", broker.secured, "--command-config", config,
        "--from-beginning", "--max-records", "3", "--json",
    )  # fmt: skip
    assert [line.count('"value-') for line in lines] == [1, 1, 1]


def test_groups_and_transactions_with_a_scram_user(broker: SecuredBroker, tmp_path: Path) -> None:
    user = unique("ops")
    broker.add_scram_user("SCRAM-SHA-512", user, "ops-secret")
    config = config_file(tmp_path, broker.java_properties("SCRAM-SHA-512", user, "ops-secret"))
    options = ("--bootstrap", broker.secured, "--command-config", config)
    assert succeeded("groups", *options)[0].split()[:2] == ["GROUP", "TOPIC"]
    assert succeeded("transactions", "list", *options)[0].startswith("TRANSACTIONAL-ID")


def test_a_refused_password_is_one_error_line_without_it(
    broker: SecuredBroker, tmp_path: Path
) -> None:
    config = config_file(tmp_path, broker.java_properties("PLAIN", "alice", "wrong-password"))
    result = run_kshim("topics", "list", "--bootstrap", broker.secured, "--command-config", config)
    assert (result.returncode, result.stdout) == (1, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(
        f"kshim topics: error: cannot authenticate to {broker.secured}: PLAIN authentication "
        "as alice: SASL_AUTHENTICATION_FAILED"
    ), line
    assert "wrong-password" not in result.stderr


def test_a_plaintext_client_at_the_secured_listener_fails_in_one_line(
    broker: SecuredBroker,
) -> None:
    """Every command that connects says what to check, not only that the broker hung up."""
    for command in (
        ("topics", "list"),
        ("acls", "list"),
        ("groups",),
        ("groups", "describe", "--state"),
        ("transactions", "list"),
        ("tail", "orders", "--timeout-ms", "100"),
    ):
        result = run_kshim(*command, "--bootstrap", broker.secured)
        assert "Traceback" not in result.stderr, result.stderr
        assert (result.returncode, result.stdout) == (1, ""), (command, result)
        [line] = result.stderr.splitlines()
        assert line.endswith(
            "(if that listener wants TLS or SASL, give --command-config with its security.protocol)"
        ), (command, line)
    produced = subprocess.run(
        [sys.executable, "-m", "kshim", "produce", "orders", "--bootstrap", broker.secured],
        input="x\n",
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert produced.returncode == 1 and "--command-config" in produced.stderr, produced


def test_the_health_check_asks_a_tls_listener_with_client_properties(
    broker: SecuredBroker, tmp_path: Path
) -> None:
    properties = tmp_path / "tls.properties"
    properties.write_text(
        f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={broker.ca_file}\n"
    )
    command = [sys.executable, "-m", "kshim.healthcheck", broker.secured]
    checked = subprocess.run(
        [*command, "--command-config", str(properties)],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked
    assert checked.stdout.startswith("healthy: ")
    plain = subprocess.run(
        command,
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert plain.returncode == 1 and plain.stderr.startswith("unhealthy: "), plain
