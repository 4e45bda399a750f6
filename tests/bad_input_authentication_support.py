"""Helpers for the authentication bad-input tests: the broker's settings, raw connections
to its listeners before anything is authenticated, SASL requests and exchanges spelled
out, and the health check made by an authenticated client.

The broker is the security suite's (``tests/e2e/security_support.py``: PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL and MTLS listeners, PLAIN users from the JAAS config, SCRAM users
stored) with a short TLS handshake timeout and SASL_PLAINTEXT narrowed to two mechanisms.
Raw connections on an SSL or SASL_SSL listener speak TLS (the CA trusted, no client
certificate) and nothing more: what is sent over it is the test's.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from kshim.client.frames import encode_body, request_header, with_size
from kshim.client.sasl import SaslClient, ScramClientExchange, sasl_client
from kshim.client.security import ClientSecurity, client_security
from kshim.client.wire import WireConnection, connect
from kshim.protocol.framing import FRAME_SIZE
from kshim.protocol.records import iter_records
from kshim.testing import BrokerProcess, fetch_fields
from tests.bad_input_support import (
    API_VERSIONS,
    FETCH,
    NONE,
    PRODUCE,
    WAIT_S,
    Baseline,
    ClientSettings,
    RecordTuple,
    crash_report,
    make_batch,
    produce_fields,
)
from tests.e2e.security_support import (
    SCRAM_PASSWORD,
    SCRAM_USER,
    Certificates,
    SecureBroker,
)

with warnings.catch_warnings():
    # kafka-python's schemas are read with a deprecated importlib API (bad_input_support.py).
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

# Wire constants (Kafka's protocol guide; Errors.java).
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
AUTHENTICATE_VERSION = 2  # flexible (KIP-482), what Kafka's clients send since 2.4
# Kafka's sasl.server.max.receive.size: the largest frame before authentication.
MAX_UNAUTHENTICATED_FRAME = 512 * 1024
MAX_TOKEN = 16 * 1024  # the largest token a mechanism reads (sasl/errors.py)
HANDSHAKE_TIMEOUT_MS = 1000  # kshim.ssl.handshake.timeout.ms, short for the tests
FAILED_AUTHENTICATION_DELAY_S = 0.1  # connection.failed.authentication.delay.ms's default

SASL_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_LISTENERS = ("SSL", "SASL_SSL")
# What each SASL listener enables: SASL_PLAINTEXT narrowed, SASL_SSL everything kshim offers.
ENABLED = {
    "SASL_PLAINTEXT": ("PLAIN", "SCRAM-SHA-256"),
    "SASL_SSL": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
}
EXTRA_SETTINGS = (
    f"kshim.ssl.handshake.timeout.ms={HANDSHAKE_TIMEOUT_MS}",
    f"listener.name.sasl_plaintext.sasl.enabled.mechanisms={','.join(ENABLED['SASL_PLAINTEXT'])}",
)
WRONG_PASSWORD = "not-the-password"

# The broker's messages (Kafka's, where Kafka has one).
INVALID_PLAIN = "Authentication failed: Invalid username or password"
BEFORE_HANDSHAKE = "SaslAuthenticate before SaslHandshake"
CLIENT_FIRST = "Authentication failed: invalid SCRAM client-first message: "
CLIENT_FINAL = "Authentication failed: invalid SCRAM client-final message: "
NONCE_MISMATCH = CLIENT_FINAL + "Server nonce doesn't match."


def invalid_credentials(mechanism: str) -> str:
    """The answer to a wrong SCRAM proof, whatever made it wrong (Kafka's wording)."""
    return (
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


def tls_only(certificates: Certificates) -> ClientSecurity:
    """TLS trusting the broker's CA, no SASL: the raw connections' security."""
    return client_security({"security.protocol": "SSL", "ssl.truststore.location": certificates.ca})


def raw_connection(
    broker: BrokerProcess, certificates: Certificates, listener: str
) -> WireConnection:
    """A connection to ``listener`` that has sent nothing (TLS done on an SSL listener)."""
    security = tls_only(certificates) if listener in TLS_LISTENERS else None
    return connect(broker.address(listener), WAIT_S, security=security)


def authenticated_client(broker: BrokerProcess, certificates: Certificates) -> ClientSettings:
    """kafka-python settings of a SCRAM-SHA-256 user over SASL_SSL."""
    return {
        "bootstrap_servers": broker.address("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": certificates.ca,
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": SCRAM_USER,
        "sasl_plain_password": SCRAM_PASSWORD,
    }


def scram_security(certificates: Certificates) -> ClientSecurity:
    """kshim's own client as the SCRAM-SHA-256 user over SASL_SSL."""
    return client_security(
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.location": certificates.ca,
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": SCRAM_USER,
            "sasl.password": SCRAM_PASSWORD,
        }
    )


# --- SASL requests ---------------------------------------------------------------------


def handshake(conn: WireConnection, mechanism: str, version: int = 1) -> Any:
    """SaslHandshake ``mechanism``; the answer (v0: raw tokens follow, v1: SaslAuthenticate)."""
    return conn.call(SASL_HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(conn: WireConnection, token: bytes) -> Any:
    """SaslAuthenticate v2 carrying ``token``; the answer."""
    return conn.call(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})


def authenticate_frame(correlation_id: int, token: bytes) -> bytes:
    """A SaslAuthenticate v2 frame carrying ``token``."""
    header = request_header(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, correlation_id, flexible=True)
    body = encode_body(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})
    return with_size(header + body)


def authenticate_frame_of_size(correlation_id: int, size: int) -> tuple[bytes, int]:
    """A SaslAuthenticate v2 frame whose size prefix says exactly ``size``, its token as
    long as that takes (``x`` repeated), and the token's length."""
    overhead = len(authenticate_frame(correlation_id, b"")) - FRAME_SIZE.size
    # The token's length prefix is a varint: a few bytes more than for an empty token.
    for token_length in range(size - overhead, size - overhead - 8, -1):
        frame = authenticate_frame(correlation_id, b"x" * token_length)
        if len(frame) - FRAME_SIZE.size == size:
            return frame, token_length
    raise AssertionError(f"no SaslAuthenticate frame of exactly {size} bytes")


def plain_token(user: str, password: str, authorization_id: str = "") -> bytes:
    """PLAIN's one message (RFC 4616): ``authzid NUL authcid NUL passwd``."""
    return f"{authorization_id}\0{user}\0{password}".encode()


@dataclass(frozen=True)
class Outcome:
    """How an exchange ended: the last SaslAuthenticate answer's error and message."""

    error_code: int
    error_message: str | None


def run_exchange(conn: WireConnection, client: SaslClient) -> Outcome:
    """Sends ``client``'s tokens in SaslAuthenticate requests until the broker refuses one
    or the client has no more (SaslHandshake already done)."""
    token: bytes | None = client.first()
    answer = None
    while token is not None:
        answer = authenticate(conn, token)
        if answer.error_code:
            break
        token = client.step(answer.auth_bytes)
    assert answer is not None
    return Outcome(answer.error_code, answer.error_message)


def attempt(
    broker: BrokerProcess,
    certificates: Certificates,
    listener: str,
    mechanism: str,
    user: str,
    password: str,
) -> tuple[Outcome, bytes]:
    """One login on a new connection: the exchange's outcome, and what the broker sent
    before closing the connection (it must close it after a refusal; WAIT_S at most)."""
    with raw_connection(broker, certificates, listener) as conn:
        assert handshake(conn, mechanism).error_code == 0
        outcome = run_exchange(conn, sasl_client(mechanism, user, password))
        return outcome, conn.wait_closed(WAIT_S)


# --- the health check ------------------------------------------------------------------


def assert_healthy_authenticated(
    broker: BrokerProcess, certificates: Certificates, baseline: Baseline
) -> None:
    """A fresh client authenticated with SCRAM-SHA-256 over SASL_SSL (kshim's own, quick
    enough for every case) produces a record, acknowledged at the next offset, and reads
    back every record the baseline holds, the new one included."""
    assert broker.is_running(), crash_report(broker)
    value = f"after-{uuid.uuid4().hex}".encode()
    target = (baseline.topic, 0)
    address = broker.address("SASL_SSL")
    with connect(address, WAIT_S, security=scram_security(certificates)) as conn:
        response = conn.call(PRODUCE, 9, produce_fields({target: make_batch([value])}))
        [[answer]] = [topic.partition_responses for topic in response.responses]
        assert (answer.error_code, answer.base_offset) == (NONE, baseline.next_offset(0))
        baseline.expected[0].append((answer.base_offset, b"raw", value))
        for partition, expected in baseline.expected.items():
            assert fetch_all(conn, baseline.topic, partition) == expected


def fetch_all(conn: WireConnection, topic: str, partition: int) -> list[RecordTuple]:
    """Every record of one partition from offset 0 (one Fetch: the tests' partitions hold
    far less than its 1 MiB)."""
    response = conn.call(FETCH, 12, fetch_fields(topic, partition, 0, max_wait_ms=0))
    [[fetched]] = [topic_response.partitions for topic_response in response.responses]
    assert fetched.error_code == NONE
    return [(r.offset, r.key, r.value) for r in iter_records(bytes(fetched.records or b""))]


# --- the module's broker, and exchanges its tests share ---------------------------------


@dataclass
class Secured:
    """The module's broker, the certificates its clients trust, and the records it must
    keep (every health check adds one and reads them all back)."""

    broker: SecureBroker
    certificates: Certificates
    baseline: Baseline

    def connect(self, listener: str) -> WireConnection:
        """A connection to ``listener`` that has sent nothing (TLS done where it says SSL)."""
        return raw_connection(self.broker, self.certificates, listener)

    def assert_healthy(self) -> None:
        assert_healthy_authenticated(self.broker, self.certificates, self.baseline)


def to_client_final(conn: WireConnection, password: str = SCRAM_PASSWORD) -> tuple[str, str]:
    """SaslHandshake and client-first as a SCRAM-SHA-256 client does; returns the
    client-final it would send next, and the nonce it carries (client's and server's)."""
    assert handshake(conn, "SCRAM-SHA-256").error_code == NONE
    exchange = ScramClientExchange("SCRAM-SHA-256", SCRAM_USER, password)
    server_first = authenticate(conn, exchange.first())
    assert server_first.error_code == NONE
    client_final = exchange.step(server_first.auth_bytes)
    assert client_final is not None
    nonce = server_first.auth_bytes.decode().split(",")[0].removeprefix("r=")
    return client_final.decode(), nonce


@dataclass
class RecordedLogin:
    """A successful SCRAM-SHA-256 login as an eavesdropper on a plaintext listener sees it."""

    client_first: bytes
    server_first: bytes
    client_final: bytes


def record_login(secured: Secured) -> RecordedLogin:
    exchange = ScramClientExchange("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
    with secured.connect("SASL_PLAINTEXT") as conn:
        assert handshake(conn, "SCRAM-SHA-256").error_code == NONE
        client_first = exchange.first()
        server_first = authenticate(conn, client_first)
        client_final = exchange.step(server_first.auth_bytes)
        assert client_final is not None
        server_final = authenticate(conn, client_final)
        assert server_final.error_code == NONE
        assert exchange.step(server_final.auth_bytes) is None  # the broker's signature verifies
    return RecordedLogin(client_first, server_first.auth_bytes, client_final)


def produce_while(
    secured: Secured, topic: str, attempts: Sequence[Future[Any]]
) -> tuple[list[RecordTuple], int]:
    """Produces one record at a time, each acknowledged, through one authenticated
    kafka-python producer, and logs in afresh every tenth record, until every attempt has
    ended; returns the records acknowledged and the fresh logins made."""
    settings = authenticated_client(secured.broker, secured.certificates)
    producer = KafkaProducer(**settings, acks="all", linger_ms=0)
    acknowledged: list[RecordTuple] = []
    fresh_logins = 0
    address = secured.broker.address("SASL_SSL")
    try:
        while not acknowledged or not all(future.done() for future in attempts):
            value = f"during-{len(acknowledged)}".encode()
            metadata = producer.send(topic, value, b"flood", partition=0).get(timeout=WAIT_S)
            acknowledged.append((metadata.offset, b"flood", value))
            if len(acknowledged) % 10 == 0:
                security = scram_security(secured.certificates)
                with connect(address, WAIT_S, security=security) as conn:
                    assert conn.call(API_VERSIONS, 0).error_code == NONE
                fresh_logins += 1
    finally:
        producer.close(timeout=5)
    return acknowledged, fresh_logins
