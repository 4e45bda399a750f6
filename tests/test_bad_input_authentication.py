"""Bad input on the authentication path: what the broker does with a peer that has not
proved who it is, on its SASL and TLS listeners.

As Kafka's SaslServerAuthenticator, kshim serves nothing but ApiVersions, SaslHandshake
and SaslAuthenticate before a SASL exchange completes: anything else closes the
connection without an answer, as does a frame over 512 KiB (sasl.server.max.receive.size).
A refused exchange is answered (SASL_AUTHENTICATION_FAILED with a message, or
UNSUPPORTED_SASL_MECHANISM with the listener's mechanisms), then closed after
connection.failed.authentication.delay.ms (KIP-306); SaslHandshake v0's raw tokens
(KIP-152) have no way to carry a refusal, so there the connection just closes. A TLS
listener drops a handshake that fails, or that has not completed within
kshim.ssl.handshake.timeout.ms. Each case asserts that outcome exactly, then that a fresh
authenticated client still produces and reads back every record acknowledged before.

One broker for the module (the security suite's, with every kind of listener), so that
the last test can read its log knowing that every line came from inputs sent here. No test
measures speed: what a wrong-password flood costs an authenticated producer is measured in
benchmarks/security.py.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from kshim.client.frames import encode_request, request_header, with_size
from kshim.client.sasl import ScramClientExchange
from kshim.client.wire import WireConnection, connect
from kshim.testing import failure_lines
from tests.bad_input_authentication_support import (
    BEFORE_HANDSHAKE,
    CLIENT_FINAL,
    CLIENT_FIRST,
    ENABLED,
    EXTRA_SETTINGS,
    FAILED_AUTHENTICATION_DELAY_S,
    HANDSHAKE_TIMEOUT_MS,
    ILLEGAL_SASL_STATE,
    INVALID_PLAIN,
    MAX_TOKEN,
    MAX_UNAUTHENTICATED_FRAME,
    NONCE_MISMATCH,
    SASL_AUTHENTICATE,
    SASL_AUTHENTICATION_FAILED,
    SASL_LISTENERS,
    TLS_LISTENERS,
    UNSUPPORTED_SASL_MECHANISM,
    WRONG_PASSWORD,
    Outcome,
    Secured,
    attempt,
    authenticate,
    authenticate_frame_of_size,
    authenticated_client,
    handshake,
    invalid_credentials,
    plain_token,
    produce_while,
    record_login,
    scram_security,
    tls_only,
    to_client_final,
)
from tests.bad_input_support import (
    API_VERSIONS,
    CREATE_TOPICS,
    METADATA,
    NONE,
    PRODUCE,
    PROMPT_S,
    UNKNOWN_TOPIC_OR_PARTITION,
    WAIT_S,
    api_versions_fallback,
    assert_closed_without_answer,
    assert_healthy,
    consume_all,
    crash_report,
    create_topic,
    make_baseline,
    make_batch,
    produce_fields,
    send_to_a_closing_broker,
)
from tests.e2e.security_support import (
    PLAIN_PASSWORD,
    PLAIN_USER,
    SCRAM_PASSWORD,
    SCRAM_USER,
    SecureBroker,
    make_certificates,
)

# --- the broker --------------------------------------------------------------------------

FIRST_PID: list[int] = []  # the broker's process id at start; another at the end: restarted


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    certificates = make_certificates(tmp_path_factory.mktemp("bad-auth-certificates"))
    broker = SecureBroker(tmp_path_factory.mktemp("bad-auth") / "data", certificates)
    broker.settings += EXTRA_SETTINGS
    broker.start()
    try:
        assert broker.process is not None
        FIRST_PID.append(broker.process.pid)
        broker.add_scram_user(SCRAM_USER, SCRAM_PASSWORD)
        yield Secured(broker, certificates, make_baseline(broker))
    finally:
        broker.stop()


# --- bytes and requests before authenticating --------------------------------------------

GARBAGE = {
    "random bytes": random.Random(20261127).randbytes(256),
    "HTTP request line": b"GET / HTTP/1.1\r\nHost: localhost:9094\r\n\r\n",
    "TLS ClientHello": bytes.fromhex("160301020001") + bytes(32),
    "all zeros": bytes(64),
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_garbage_before_the_handshake_closes(
    secured: Secured, listener: str, garbage: bytes
) -> None:
    with secured.connect(listener) as conn:
        conn.send(garbage)
        assert_closed_without_answer(conn)
    secured.assert_healthy()


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_first_bytes_over_512_kib_close_however_soon_they_come(
    secured: Secured, listener: str
) -> None:
    # The bound holds from a connection's first byte, also for bytes that arrive before the
    # broker has begun serving the connection (read against socket.request.max.bytes, they
    # would let a peer that has proved nothing make the broker buffer 100 MB); sent with
    # the connect, again and again.
    over = (MAX_UNAUTHENTICATED_FRAME + 1).to_bytes(4, "big") + bytes(64)
    for _ in range(20):
        with secured.connect(listener) as conn:
            conn.send(over)
            assert_closed_without_answer(conn)
    secured.assert_healthy()


def _unauthenticated_produce(topic: str, correlation_id: int) -> bytes:
    fields = produce_fields({(topic, 0): make_batch([b"unauthenticated"])})
    return encode_request(PRODUCE, 9, correlation_id, fields)


def _nothing(conn: WireConnection) -> None:
    pass


def _api_versions(conn: WireConnection) -> None:
    software = {"client_software_name": "raw", "client_software_version": "1.0"}
    assert conn.call(API_VERSIONS, 3, software).error_code == NONE


def _plain_handshake(conn: WireConnection) -> None:
    assert handshake(conn, "PLAIN").error_code == NONE


def _scram_client_first(conn: WireConnection) -> None:
    assert handshake(conn, "SCRAM-SHA-256").error_code == NONE
    exchange = ScramClientExchange("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
    assert authenticate(conn, exchange.first()).error_code == NONE


STAGES: dict[str, Callable[[WireConnection], None]] = {
    "first": _nothing,
    "after ApiVersions": _api_versions,
    "after SaslHandshake": _plain_handshake,
    "between SCRAM client-first and client-final": _scram_client_first,
}


@pytest.mark.parametrize("stage", STAGES.values(), ids=STAGES.keys())
@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_produce_before_authenticating_closes_and_writes_nothing(
    secured: Secured, listener: str, stage: Callable[[WireConnection], None]
) -> None:
    with secured.connect(listener) as conn:
        stage(conn)
        conn.send(_unauthenticated_produce(secured.baseline.topic, 50))
        assert_closed_without_answer(conn)
    # The health check's record lands at the next offset: nothing was appended before it.
    secured.assert_healthy()


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_request_pipelined_behind_api_versions_closes(secured: Secured, listener: str) -> None:
    with secured.connect(listener) as conn:
        conn.send(
            encode_request(API_VERSIONS, 0, 1, {})
            + _unauthenticated_produce(secured.baseline.topic, 2)
        )
        assert conn.read_response(API_VERSIONS, 0, 1).error_code == NONE
        assert_closed_without_answer(conn)
    secured.assert_healthy()


def test_create_topics_before_authenticating_closes_and_creates_nothing(
    secured: Secured,
) -> None:
    name = f"unauthenticated-{uuid.uuid4().hex[:8]}"
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "configs": []}
    with secured.connect("SASL_PLAINTEXT") as conn:
        conn.send(encode_request(CREATE_TOPICS, 7, 1, {"topics": [topic], "timeout": 5000}))
        assert_closed_without_answer(conn)
    with connect(secured.broker.bootstrap) as plaintext:
        lookup = {"topics": [{"name": name}], "allow_auto_topic_creation": False}
        metadata = plaintext.call(METADATA, 12, lookup)
    assert [(t.name, t.error_code) for t in metadata.topics] == [(name, UNKNOWN_TOPIC_OR_PARTITION)]
    secured.assert_healthy()


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_sasl_authenticate_before_the_handshake_is_refused_then_closed(
    secured: Secured, listener: str
) -> None:
    with secured.connect(listener) as conn:
        answer = authenticate(conn, plain_token(PLAIN_USER, PLAIN_PASSWORD))
        assert (answer.error_code, answer.error_message) == (ILLEGAL_SASL_STATE, BEFORE_HANDSHAKE)
        assert_closed_without_answer(conn)
    secured.assert_healthy()


def _second_handshake(conn: WireConnection) -> tuple[int, tuple[object, ...]]:
    answer = handshake(conn, "PLAIN")
    return answer.error_code, tuple(answer.mechanisms)


def _api_versions_answer(conn: WireConnection) -> tuple[int, tuple[object, ...]]:
    answer = conn.call(API_VERSIONS, 3)
    return answer.error_code, tuple(answer.api_keys)


# Requests other than SaslAuthenticate once SaslHandshake has chosen a mechanism, each
# answered with its error code and the answer's list left empty.
DURING_THE_EXCHANGE = {
    "SaslHandshake again": _second_handshake,
    "ApiVersions": _api_versions_answer,
}


@pytest.mark.parametrize("request_kind", DURING_THE_EXCHANGE)
@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_a_request_during_the_exchange_is_refused_then_closed_as_a_failed_login(
    secured: Secured, listener: str, request_kind: str
) -> None:
    """Kafka's SaslServerAuthenticator: an IllegalSaslStateException, answered, then the
    failed login's delay (KIP-306) and the close."""
    with secured.connect(listener) as conn:
        assert handshake(conn, "PLAIN").error_code == NONE
        started = time.monotonic()
        assert DURING_THE_EXCHANGE[request_kind](conn) == (ILLEGAL_SASL_STATE, ())
        assert_closed_without_answer(conn)
        assert time.monotonic() - started >= FAILED_AUTHENTICATION_DELAY_S
    secured.assert_healthy()


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_a_second_api_versions_before_the_handshake_closes_unanswered(
    secured: Secured, listener: str
) -> None:
    """Kafka's SaslServerAuthenticator takes one ApiVersions before SaslHandshake; another
    is an IllegalStateException: the connection closes without an answer."""
    with secured.connect(listener) as conn:
        _api_versions(conn)
        conn.send(encode_request(API_VERSIONS, 3, 9, {}))
        assert_closed_without_answer(conn)
    secured.assert_healthy()


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_api_versions_retried_at_a_lower_version_is_served(secured: Secured, listener: str) -> None:
    """An ApiVersions version the broker lacks gets KIP-511's fallback answer; the client
    asks again at a version it was offered, and that one is served too."""
    with secured.connect(listener) as conn:
        conn.send(with_size(request_header(API_VERSIONS, 99, 5, flexible=True) + b"\x00"))
        assert conn.read_exactly(20) == api_versions_fallback(5)
        _api_versions(conn)
        assert handshake(conn, "PLAIN").error_code == NONE
    secured.assert_healthy()


UNKNOWN_MECHANISMS = {
    "GSSAPI": ("SASL_PLAINTEXT", "GSSAPI", 1),
    "lower-case plain": ("SASL_PLAINTEXT", "plain", 1),
    "offered, not enabled on the listener": ("SASL_PLAINTEXT", "SCRAM-SHA-512", 1),
    "empty": ("SASL_PLAINTEXT", "", 1),
    "OAUTHBEARER over TLS": ("SASL_SSL", "OAUTHBEARER", 1),
    "GSSAPI, SaslHandshake v0": ("SASL_SSL", "GSSAPI", 0),
}


@pytest.mark.parametrize("case", UNKNOWN_MECHANISMS.values(), ids=UNKNOWN_MECHANISMS.keys())
def test_unknown_mechanism_is_refused_with_the_enabled_ones_then_closed(
    secured: Secured, case: tuple[str, str, int]
) -> None:
    listener, mechanism, version = case
    with secured.connect(listener) as conn:
        answer = handshake(conn, mechanism, version)
        assert (answer.error_code, tuple(answer.mechanisms)) == (
            UNSUPPORTED_SASL_MECHANISM,
            ENABLED[listener],
        )
        assert_closed_without_answer(conn)
    secured.assert_healthy()


# --- tokens too large, truncated or malformed ---------------------------------------------


@pytest.mark.parametrize("raw_token", [False, True], ids=["SaslAuthenticate", "v0 raw token"])
@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_frame_over_512_kib_closes(secured: Secured, listener: str, raw_token: bool) -> None:
    with secured.connect(listener) as conn:
        assert handshake(conn, "PLAIN", 0 if raw_token else 1).error_code == NONE
        if raw_token:
            frame = with_size(b"x" * (MAX_UNAUTHENTICATED_FRAME + 1))
        else:
            frame = authenticate_frame_of_size(7, MAX_UNAUTHENTICATED_FRAME + 1)[0]
        send_to_a_closing_broker(conn, frame)
        assert_closed_without_answer(conn)
    secured.assert_healthy()


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_frame_of_exactly_512_kib_is_read_and_its_token_refused(
    secured: Secured, listener: str
) -> None:
    frame, token_length = authenticate_frame_of_size(7, MAX_UNAUTHENTICATED_FRAME)
    with secured.connect(listener) as conn:
        assert handshake(conn, "PLAIN").error_code == NONE
        conn.send(frame)
        answer = conn.read_response(SASL_AUTHENTICATE, 2, 7)
        assert (answer.error_code, answer.error_message) == (
            SASL_AUTHENTICATION_FAILED,
            f"Authentication failed: a PLAIN token of {token_length} bytes is over "
            f"{MAX_TOKEN} bytes",
        )
        assert_closed_without_answer(conn)
    secured.assert_healthy()


def test_truncated_sasl_authenticate_request_closes(secured: Secured) -> None:
    frame = encode_request(SASL_AUTHENTICATE, 2, 7, {"auth_bytes": plain_token("alice", "x")})
    with secured.connect("SASL_PLAINTEXT") as conn:
        assert handshake(conn, "PLAIN").error_code == NONE
        conn.send(with_size(frame[4:-6]))  # the token's length says more than is there
        assert_closed_without_answer(conn)
    secured.assert_healthy()


PLAIN_REFUSED = {
    "not UTF-8": (b"\0alice\0\xff\xfe", "Authentication failed: the PLAIN token is not UTF-8"),
    "empty": (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    "two fields": (b"alice\0secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    "four fields": (b"\0a\0b\0c", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    "no user": (b"\0\0secret", "Authentication failed: username not specified"),
    "no password": (b"\0alice\0", "Authentication failed: password not specified"),
    "another user's authorization id": (
        plain_token(PLAIN_USER, PLAIN_PASSWORD, authorization_id=SCRAM_USER),
        "Authentication failed: Client requested an authorization id that is different from "
        "username",
    ),
    "exactly 16 KiB": (b"x" * MAX_TOKEN, "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    "16 KiB and one byte": (
        b"x" * (MAX_TOKEN + 1),
        f"Authentication failed: a PLAIN token of {MAX_TOKEN + 1} bytes is over {MAX_TOKEN} bytes",
    ),
}


@pytest.mark.parametrize("case", PLAIN_REFUSED.values(), ids=PLAIN_REFUSED.keys())
def test_malformed_plain_token_is_refused_then_closed(
    secured: Secured, case: tuple[bytes, str]
) -> None:
    token, message = case
    with secured.connect("SASL_PLAINTEXT") as conn:
        assert handshake(conn, "PLAIN").error_code == NONE
        answer = authenticate(conn, token)
        assert (answer.error_code, answer.error_message) == (SASL_AUTHENTICATION_FAILED, message)
        assert_closed_without_answer(conn)
    secured.assert_healthy()


GS2_EXPECTED = "expected gs2-header,n=<user>,r=<nonce>"
MALFORMED_ATTRIBUTES = (
    "Attributes must be separated by a ',' and each attribute must start with a letter "
    "followed by a '='"
)
EMPTY_ATTRIBUTE = "Attribute values must at least one character long"  # scramp's words
CLIENT_FIRST_REFUSED = {
    "n": CLIENT_FIRST + GS2_EXPECTED,
    "n,,": CLIENT_FIRST + GS2_EXPECTED,
    "n,,n=sam": CLIENT_FIRST + GS2_EXPECTED,
    "n,,n=sam,r": CLIENT_FIRST + "Malformed client_first_bare message. " + MALFORMED_ATTRIBUTES,
    "n,,n=sam,r=": CLIENT_FIRST + "Malformed client_first_bare message. " + EMPTY_ATTRIBUTE,
    "p=tls-unique,,n=sam,r=abc": CLIENT_FIRST + "Received GS2 flag 'p' which indicates that "
    "the client requires channel binding, but the server does not",
}


@pytest.mark.parametrize("case", CLIENT_FIRST_REFUSED.items(), ids=CLIENT_FIRST_REFUSED.keys())
def test_truncated_scram_client_first_is_refused_then_closed(
    secured: Secured, case: tuple[str, str]
) -> None:
    token, message = case
    with secured.connect("SASL_PLAINTEXT") as conn:
        assert handshake(conn, "SCRAM-SHA-256").error_code == NONE
        answer = authenticate(conn, token.encode())
        assert (answer.error_code, answer.error_message) == (SASL_AUTHENTICATION_FAILED, message)
        assert_closed_without_answer(conn)
    secured.assert_healthy()


def _without_proof(final: str, nonce: str) -> str:
    return final.rsplit(",p=", 1)[0]


CLIENT_FINAL_REFUSED: dict[str, tuple[Callable[[str, str], str], str]] = {
    "without the proof": (
        _without_proof,
        CLIENT_FINAL + "Malformed client final message. Expected the attribute str to be one "
        "of ['crp'] but found 'cr'",
    ),
    "empty proof": (
        lambda final, nonce: _without_proof(final, nonce) + ",p=",
        CLIENT_FINAL + "Malformed client final message. " + EMPTY_ATTRIBUTE,
    ),
    "empty": (
        lambda final, nonce: "",
        CLIENT_FINAL + "Malformed client final message. " + MALFORMED_ATTRIBUTES,
    ),
    "nonce with its last character changed": (
        lambda final, nonce: final.replace(nonce, nonce[:-1] + ("A" if nonce[-1] != "A" else "B")),
        NONCE_MISMATCH,
    ),
    "the client's nonce alone": (
        lambda final, nonce: final.replace(nonce, nonce[:64]),  # scramp's 64 hex digits
        NONCE_MISMATCH,
    ),
    "channel binding changed": (
        lambda final, nonce: final.replace("c=biws", "c=eSws"),  # gs2 header "y,,"
        CLIENT_FINAL + "The channel bindings don't match.",
    ),
    "proof changed": (
        lambda final, nonce: _without_proof(final, nonce) + ",p=" + "A" * 43 + "=",
        invalid_credentials("SCRAM-SHA-256"),
    ),
}


@pytest.mark.parametrize("case", CLIENT_FINAL_REFUSED.values(), ids=CLIENT_FINAL_REFUSED.keys())
@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_bad_scram_client_final_is_refused_then_closed(
    secured: Secured, listener: str, case: tuple[Callable[[str, str], str], str]
) -> None:
    change, message = case
    with secured.connect(listener) as conn:
        final, nonce = to_client_final(conn)
        answer = authenticate(conn, change(final, nonce).encode())
        assert (answer.error_code, answer.error_message) == (SASL_AUTHENTICATION_FAILED, message)
        assert_closed_without_answer(conn)
    secured.assert_healthy()


# --- replayed SCRAM messages -------------------------------------------------------------


@pytest.mark.parametrize("fresh_client_first", [False, True], ids=["replayed", "fresh"])
def test_replayed_scram_client_final_fails_on_a_new_connection(
    secured: Secured, fresh_client_first: bool
) -> None:
    recorded = record_login(secured)
    with secured.connect("SASL_PLAINTEXT") as conn:
        assert handshake(conn, "SCRAM-SHA-256").error_code == NONE
        client_first = recorded.client_first
        if fresh_client_first:
            client_first = ScramClientExchange("SCRAM-SHA-256", SCRAM_USER, "").first()
        server_first = authenticate(conn, client_first)
        # A new server nonce each time (RFC 5802 §5.1): the recorded proof cannot match it.
        assert server_first.error_code == NONE
        assert server_first.auth_bytes != recorded.server_first
        answer = authenticate(conn, recorded.client_final)
        assert (answer.error_code, answer.error_message) == (
            SASL_AUTHENTICATION_FAILED,
            NONCE_MISMATCH,
        )
        assert_closed_without_answer(conn)
    secured.assert_healthy()


def test_replayed_scram_client_final_as_the_first_token_is_refused(secured: Secured) -> None:
    recorded = record_login(secured)
    with secured.connect("SASL_PLAINTEXT") as conn:
        assert handshake(conn, "SCRAM-SHA-256").error_code == NONE
        answer = authenticate(conn, recorded.client_final)
        assert (answer.error_code, answer.error_message) == (
            SASL_AUTHENTICATION_FAILED,
            CLIENT_FIRST + GS2_EXPECTED,
        )
        assert_closed_without_answer(conn)
    secured.assert_healthy()


def test_sasl_requests_after_authenticating_are_refused_and_the_connection_serves(
    secured: Secured,
) -> None:
    address = secured.broker.address("SASL_SSL")
    with connect(address, WAIT_S, security=scram_security(secured.certificates)) as conn:
        again = handshake(conn, "PLAIN")
        assert (again.error_code, tuple(again.mechanisms)) == (ILLEGAL_SASL_STATE, ())
        replayed = authenticate(conn, plain_token(PLAIN_USER, PLAIN_PASSWORD))
        assert (replayed.error_code, replayed.error_message) == (
            ILLEGAL_SASL_STATE,
            "SaslAuthenticate request received after successful authentication",
        )
        assert conn.call(API_VERSIONS, 0).error_code == NONE
    secured.assert_healthy()


# --- wrong passwords ---------------------------------------------------------------------

WRONG_LOGINS = {
    "PLAIN, a JAAS user": ("PLAIN", PLAIN_USER, WRONG_PASSWORD, INVALID_PLAIN),
    "PLAIN, a SCRAM user": ("PLAIN", SCRAM_USER, WRONG_PASSWORD, INVALID_PLAIN),
    "PLAIN, no such user": ("PLAIN", "nobody", WRONG_PASSWORD, INVALID_PLAIN),
    "SCRAM-SHA-256": (
        "SCRAM-SHA-256",
        SCRAM_USER,
        WRONG_PASSWORD,
        invalid_credentials("SCRAM-SHA-256"),
    ),
    "SCRAM-SHA-512, no such user": (
        "SCRAM-SHA-512",
        "nobody",
        WRONG_PASSWORD,
        invalid_credentials("SCRAM-SHA-512"),
    ),
    # alice has a PLAIN password and no SCRAM credential: SCRAM cannot log her in.
    "SCRAM-SHA-256, a PLAIN user's right password": (
        "SCRAM-SHA-256",
        PLAIN_USER,
        PLAIN_PASSWORD,
        invalid_credentials("SCRAM-SHA-256"),
    ),
}


@pytest.mark.parametrize("case", WRONG_LOGINS.values(), ids=WRONG_LOGINS.keys())
def test_wrong_password_is_refused_then_closed_after_the_delay(
    secured: Secured, case: tuple[str, str, str, str]
) -> None:
    mechanism, user, password, message = case
    started = time.monotonic()
    outcome, sent_before_closing = attempt(
        secured.broker, secured.certificates, "SASL_SSL", mechanism, user, password
    )
    closed_after_s = time.monotonic() - started
    assert outcome == Outcome(SASL_AUTHENTICATION_FAILED, message)
    assert sent_before_closing == b""
    # A lower bound the broker sets, not a speed: each guess costs a connection and the
    # delay (KIP-306).
    assert closed_after_s >= FAILED_AUTHENTICATION_DELAY_S
    secured.assert_healthy()


# --- SaslHandshake v0: raw tokens --------------------------------------------------------


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_v0_raw_plain_token_authenticates(secured: Secured, listener: str) -> None:
    topic = secured.baseline.topic
    with secured.connect(listener) as conn:
        assert handshake(conn, "PLAIN", 0).error_code == NONE
        conn.send(with_size(plain_token(PLAIN_USER, PLAIN_PASSWORD)))
        assert conn.read_frame() == b""  # PLAIN's empty answer, as a bare frame
        metadata = conn.call(METADATA, 12, {"topics": [{"name": topic}]})
        assert [(t.name, t.error_code) for t in metadata.topics] == [(topic, NONE)]
    secured.assert_healthy()


def test_v0_raw_scram_tokens_authenticate(secured: Secured) -> None:
    exchange = ScramClientExchange("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
    with secured.connect("SASL_SSL") as conn:
        assert handshake(conn, "SCRAM-SHA-256", 0).error_code == NONE
        conn.send(with_size(exchange.first()))
        client_final = exchange.step(conn.read_frame())
        assert client_final is not None
        conn.send(with_size(client_final))
        assert exchange.step(conn.read_frame()) is None  # server-final verifies
        assert conn.call(API_VERSIONS, 0).error_code == NONE
    secured.assert_healthy()


def _raw_plain(password: str) -> Callable[[WireConnection], None]:
    def send(conn: WireConnection) -> None:
        conn.send(with_size(plain_token(PLAIN_USER, password)))

    return send


def _raw_scram_wrong_proof(conn: WireConnection) -> None:
    exchange = ScramClientExchange("SCRAM-SHA-256", SCRAM_USER, WRONG_PASSWORD)
    conn.send(with_size(exchange.first()))
    client_final = exchange.step(conn.read_frame())
    assert client_final is not None
    conn.send(with_size(client_final))


V0_REFUSED: dict[str, tuple[str, Callable[[WireConnection], None]]] = {
    "PLAIN, wrong password": ("PLAIN", _raw_plain(WRONG_PASSWORD)),
    "PLAIN, a Kafka request where the token is due": (
        "PLAIN",
        lambda conn: conn.send(encode_request(API_VERSIONS, 0, 9, {})),
    ),
    "SCRAM, truncated client-first": (
        "SCRAM-SHA-256",
        lambda conn: conn.send(with_size(b"n,,n=sam")),
    ),
    "SCRAM, wrong password": ("SCRAM-SHA-256", _raw_scram_wrong_proof),
}


@pytest.mark.parametrize("case", V0_REFUSED.values(), ids=V0_REFUSED.keys())
def test_v0_raw_token_refused_closes_without_an_answer(
    secured: Secured, case: tuple[str, Callable[[WireConnection], None]]
) -> None:
    mechanism, send_tokens = case
    with secured.connect("SASL_PLAINTEXT") as conn:
        assert handshake(conn, mechanism, 0).error_code == NONE
        send_tokens(conn)
        assert_closed_without_answer(conn)
    secured.assert_healthy()


# --- TLS ---------------------------------------------------------------------------------

NOT_TLS = {
    "random bytes": random.Random(20261128).randbytes(256),
    "HTTP request line": b"GET / HTTP/1.1\r\nHost: localhost:9093\r\n\r\n",
    "Kafka request in plaintext": encode_request(API_VERSIONS, 0, 1, {}),
    "TLS record of garbage": bytes.fromhex("1603010020") + random.Random(5).randbytes(32),
    "all 0xff": b"\xff" * 64,
}


def _assert_tls_listener_serves(secured: Secured, listener: str) -> None:
    address = secured.broker.address(listener)
    with connect(address, WAIT_S, security=tls_only(secured.certificates)) as conn:
        assert conn.call(API_VERSIONS, 0).error_code == NONE


@pytest.mark.parametrize("garbage", NOT_TLS.values(), ids=NOT_TLS.keys())
@pytest.mark.parametrize("listener", TLS_LISTENERS)
def test_garbage_instead_of_a_tls_client_hello_closes(
    secured: Secured, listener: str, garbage: bytes
) -> None:
    with connect(secured.broker.address(listener), WAIT_S) as conn:  # TCP, no TLS
        conn.send(garbage)
        assert_closed_without_answer(conn)
    _assert_tls_listener_serves(secured, listener)
    secured.assert_healthy()


HANDSHAKE_STARTS = {
    "SSL, nothing": ("SSL", b""),
    "SASL_SSL, nothing": ("SASL_SSL", b""),
    "SSL, a record header alone": ("SSL", bytes.fromhex("16030100c8")),
    "SSL, part of a record": ("SSL", bytes.fromhex("160301020001") + bytes(32)),
}


@pytest.mark.parametrize("case", HANDSHAKE_STARTS.values(), ids=HANDSHAKE_STARTS.keys())
def test_tls_handshake_not_completed_is_dropped_after_the_timeout(
    secured: Secured, case: tuple[str, bytes]
) -> None:
    listener, start = case
    with connect(secured.broker.address(listener), WAIT_S) as conn:
        if start:
            conn.send(start)
        # The broker waits for the rest of the handshake ...
        with pytest.raises(TimeoutError):
            conn.read_exactly(1, timeout_s=0.2)
        # ... until kshim.ssl.handshake.timeout.ms, then drops the connection.
        assert conn.wait_closed(HANDSHAKE_TIMEOUT_MS / 1000 + PROMPT_S) == b""
    _assert_tls_listener_serves(secured, listener)
    secured.assert_healthy()


# --- a flood of wrong passwords ----------------------------------------------------------

FLOOD_ATTEMPTS = 1000
FLOOD_CONCURRENCY = 50
FLOOD_LOGINS = (
    ("PLAIN", PLAIN_USER, INVALID_PLAIN),
    ("PLAIN", SCRAM_USER, INVALID_PLAIN),  # checked against the stored SCRAM credential
    ("SCRAM-SHA-256", SCRAM_USER, invalid_credentials("SCRAM-SHA-256")),
    ("SCRAM-SHA-512", "nobody", invalid_credentials("SCRAM-SHA-512")),
)


def _wrong_login(secured: Secured, index: int) -> tuple[str, str, Outcome, bytes]:
    mechanism, user, _ = FLOOD_LOGINS[index % len(FLOOD_LOGINS)]
    outcome, sent = attempt(
        secured.broker, secured.certificates, "SASL_SSL", mechanism, user, WRONG_PASSWORD
    )
    return mechanism, user, outcome, sent


def test_wrong_password_flood_while_an_authenticated_client_produces(secured: Secured) -> None:
    topic = f"flood-{uuid.uuid4().hex[:8]}"
    create_topic(secured.broker.bootstrap, topic, 1, {})
    with ThreadPoolExecutor(FLOOD_CONCURRENCY) as pool:
        attempts = [pool.submit(_wrong_login, secured, index) for index in range(FLOOD_ATTEMPTS)]
        acknowledged, fresh_logins = produce_while(secured, topic, attempts)
        results = [future.result() for future in attempts]
    per_login = FLOOD_ATTEMPTS // len(FLOOD_LOGINS)
    assert Counter(results) == {
        (mechanism, user, Outcome(SASL_AUTHENTICATION_FAILED, message), b""): per_login
        for mechanism, user, message in FLOOD_LOGINS
    }
    assert [offset for offset, _, _ in acknowledged] == list(range(len(acknowledged)))
    assert fresh_logins == len(acknowledged) // 10
    client = authenticated_client(secured.broker, secured.certificates)
    assert consume_all(secured.broker.bootstrap, topic, {0: len(acknowledged)}, client) == {
        0: acknowledged
    }
    assert_healthy(secured.broker, secured.baseline, client)


# --- after everything --------------------------------------------------------------------


def test_broker_still_serves_and_logged_no_failure_of_its_own(secured: Secured) -> None:
    broker = secured.broker
    assert broker.is_running(), crash_report(broker)
    assert broker.process is not None
    assert [broker.process.pid] == FIRST_PID, "restarted after a crash"
    assert not failure_lines(broker.log_text()), crash_report(broker)
    # Another client than kshim's own, authenticated, sees every record acknowledged.
    assert_healthy(broker, secured.baseline, authenticated_client(broker, secured.certificates))
