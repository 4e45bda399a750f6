"""kafka-python, aiokafka, confluent-kafka and kcat against a real ``kshim serve`` over
every security protocol: TLS, SASL/PLAIN, SASL/SCRAM-SHA-256 and -512 over plaintext and
TLS, and mutual TLS (a client certificate the broker requires).

- Each client produces and consumes over each login; kafka-python and confluent-kafka also
  commit a transaction and a consumer group's offsets over each.
- Each client is refused a wrong password, an unknown user, a broker certificate from a CA
  it does not trust, and (on the mTLS listener) a connection without a client certificate,
  and surfaces its own usual error for it, with the broker's reason where it has one.
- The principal the broker derives (the certificate's common name through
  ``ssl.principal.mapping.rules``, the SASL user) is checked through ACLs: the authoriser is
  on and only some principals are super users, so a login as any other principal is denied
  the topic (TOPIC_AUTHORIZATION_FAILED).

One broker serves the whole module (tests/e2e/security_support.py); each test has a topic
of its own. kcat is skipped with a reason when not installed; its SCRAM logins are expected
to fail while it bundles a librdkafka older than 2.6.1 (see LIBRDKAFKA_SCRAM_FIXED).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kshim.testing import failure_lines
from tests.e2e.client_helpers import unique_topic
from tests.e2e.security_clients import (
    CLIENTS,
    DENIALS,
    REFUSALS,
    ROUND_TRIPS,
    TRANSACTIONS_AND_GROUPS,
)
from tests.e2e.security_support import (
    ADMIN_TIMEOUT_S,
    LOGINS,
    OTHER_SCRAM_PASSWORD,
    OTHER_SCRAM_USER,
    REFUSED_LOGINS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    UNAUTHORISED_LOGINS,
    Login,
    Refusal,
    SecureBroker,
    librdkafka_settings,
    make_certificates,
)

pytestmark = pytest.mark.timeout(60)

VALUES = [b"first", b"second", b"third"]
LARGE_COUNT, LARGE_VALUE_BYTES = 4000, 1024  # about 4 MB: several fetches of 1 MB
# librdkafka before 2.6.1 (Debian's kcat bundles 2.0.2) puts its own nonce in front of the
# server's in the SCRAM client-final message (librdkafka#4895); kshim accepts that, as Kafka
# 3.8.1 to 3.9 do, so kcat's SCRAM logins are in the matrix like every other.
# How each client says the broker refused it, by refusal kind; {message} is the broker's
# SaslAuthenticate error message. On a failed TLS handshake Kafka sends an alert
# ("certificate required" under TLS 1.3); kshim's listener closes the connection without
# one, which each client reports as the connection ending: both are accepted.
LIBRDKAFKA_CLOSED = (
    r"certificate[ _]required|unexpected eof|connection reset by peer|SSL connection closed by peer"
)
SURFACED = {
    "kafka-python": {
        "sasl": r"SaslAuthenticationFailedError: .*{message}",
        "untrusted-server": r"Handshake failed: \[SSL: CERTIFICATE_VERIFY_FAILED\]",
        "no-client-certificate": r"certificate[ _]required|socket disconnected|reset by peer",
    },
    "aiokafka": {
        "sasl": r"\[Error 58\] SaslAuthenticationFailed: {message}",
        "untrusted-server": r"\[SSL: CERTIFICATE_VERIFY_FAILED\]",
        "no-client-certificate": r"certificate[ _]required|Connection at \S+ closed|reset by peer",
    },
    "confluent": {
        "sasl": r"_AUTHENTICATION: .*SASL authentication error: {message}",
        "untrusted-server": r"_(SSL|TRANSPORT): .*SSL routines::certificate verify failed",
        "no-client-certificate": LIBRDKAFKA_CLOSED,
    },
    "kcat": {
        "sasl": r"SASL authentication error: {message}",
        "untrusted-server": r"SSL routines::certificate verify failed",
        "no-client-certificate": LIBRDKAFKA_CLOSED,
    },
}
DENIED = {
    "kafka-python": r"TopicAuthorizationFailedError",
    "aiokafka": r"TopicAuthorizationFailedError",
    "confluent": r"TOPIC_AUTHORIZATION_FAILED: Broker: Topic authorization failed",
    "kcat": r"Delivery failed for message: Broker: Topic authorization failed",
}


def matrix(logins: dict[str, Login], clients: tuple[str, ...]) -> list[object]:
    """(client, login) parameters."""
    return [
        pytest.param(client, login, id=f"{client}-{name}")
        for client in clients
        for name, login in logins.items()
    ]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """One broker for the module, with its SCRAM users; its log must show no failure."""
    directory: Path = tmp_path_factory.mktemp("security")
    started = SecureBroker(directory / "data", make_certificates(directory)).start()
    try:
        started.add_scram_user(SCRAM_USER, SCRAM_PASSWORD)
        started.add_scram_user(OTHER_SCRAM_USER, OTHER_SCRAM_PASSWORD)
        yield started
    finally:
        started.stop()
    assert failure_lines(started.log_text()) == []


def new_topic(broker: SecureBroker, label: str) -> str:
    """A topic of one partition, created over the PLAINTEXT listener."""
    topic = unique_topic(label)
    for future in broker.admin().create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=ADMIN_TIMEOUT_S)
    return topic


@pytest.mark.parametrize(("client", "login"), matrix(LOGINS, CLIENTS))
def test_produce_and_consume(broker: SecureBroker, client: str, login: Login) -> None:
    topic = new_topic(broker, f"security-{client}")

    assert ROUND_TRIPS[client](broker, login, topic, VALUES) == VALUES


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("login_name", ["ssl", "sasl_ssl-scram-sha-256"])
def test_reads_of_many_megabytes_over_tls(
    broker: SecureBroker, client: str, login_name: str
) -> None:
    """Fetch answers of a megabyte and more go out encrypted in pieces (the broker's
    encrypted_sender.py): every record arrives, whole and in order."""
    topic = new_topic(broker, f"security-large-{client}")
    values = [f"{index:06d}-".encode() + b"x" * LARGE_VALUE_BYTES for index in range(LARGE_COUNT)]

    assert ROUND_TRIPS[client](broker, LOGINS[login_name], topic, values) == values


@pytest.mark.parametrize(("client", "login"), matrix(LOGINS, tuple(TRANSACTIONS_AND_GROUPS)))
def test_transaction_and_group_commit(broker: SecureBroker, client: str, login: Login) -> None:
    topic = new_topic(broker, f"security-transaction-{client}")

    read, committed, position = TRANSACTIONS_AND_GROUPS[client](broker, login, topic, VALUES)

    assert read == VALUES
    # The group has where the consumer stands: past the three records (offsets 0-2), and
    # past the transaction's commit marker (offset 3) once the client has stepped over it
    # (kafka-python has by then; librdkafka has not).
    assert committed == position
    assert position in (len(VALUES), len(VALUES) + 1)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", list(REFUSED_LOGINS))
def test_refused_login(broker: SecureBroker, client: str, case: str) -> None:
    refusal: Refusal = REFUSED_LOGINS[case]
    message = re.escape(refusal.broker_message) if refusal.kind == "sasl" else ""

    surfaced = REFUSALS[client](broker, refusal.login)

    pattern = SURFACED[client][refusal.kind].format(message=message)
    assert re.search(pattern, surfaced, re.IGNORECASE), surfaced


@pytest.mark.parametrize(("client", "login"), matrix(UNAUTHORISED_LOGINS, CLIENTS))
def test_principal_without_acls_is_denied(broker: SecureBroker, client: str, login: Login) -> None:
    topic = new_topic(broker, f"security-denied-{client}")

    surfaced = DENIALS[client](broker, login, topic)

    assert re.search(DENIED[client], surfaced), surfaced


TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


def test_authorized_operations_as_confluent_kafka_reads_them(broker: SecureBroker) -> None:
    """KIP-430 through librdkafka's admin (Metadata with include_topic_authorized_operations):
    a principal granted READ sees READ and the DESCRIBE it implies; a super user sees every
    operation a topic supports."""
    topic = new_topic(broker, "security-operations")
    bob = UNAUTHORISED_LOGINS["sasl_plaintext-plain-bob"]
    read = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{bob.user}", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    for future in broker.admin().create_acls([read]).values():
        future.result(timeout=ADMIN_TIMEOUT_S)

    def operations(login: Login) -> set[AclOperation]:
        admin = AdminClient(librdkafka_settings(broker, login))
        asked = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
        return set(asked[topic].result(timeout=ADMIN_TIMEOUT_S).authorized_operations)

    assert operations(bob) == {AclOperation.READ, AclOperation.DESCRIBE}
    super_user = LOGINS["sasl_ssl-scram-sha-256"]
    assert operations(super_user) == TOPIC_OPERATIONS
    # describe_cluster: librdkafka reads the cluster's from Metadata (v8-v10's field).
    admin = AdminClient(librdkafka_settings(broker, super_user))  # kept until answered
    cluster = admin.describe_cluster(include_authorized_operations=True)
    assert set(cluster.result(timeout=ADMIN_TIMEOUT_S).authorized_operations) == CLUSTER_OPERATIONS
