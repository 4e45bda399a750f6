"""SASL/PLAIN's server (security/sasl/plain.py), sans-io: the listener's JAAS users, the
SCRAM users' passwords, and Kafka's PlainSaslServer's answers to every malformed token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.credentials import Credentials
from kshim.broker.security.sasl.errors import MAX_TOKEN_BYTES, AuthenticationFailed
from kshim.broker.security.sasl.factory import start_exchange
from kshim.broker.security.scram_credential import ScramCredential
from kshim.broker.security.session import SaslExchange
from kshim.protocol.scram_mechanisms import mechanism_type
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.scram_store import StoredScramCredential

LISTENER = "SASL_PLAINTEXT"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret" user_quoted="say \\"hi\\"";'
)
INVALID = "Authentication failed: Invalid username or password"


@pytest.fixture
def credentials(tmp_path: Path) -> Iterator[Credentials]:
    """JAAS users admin, alice and quoted on SASL_PLAINTEXT; SCRAM users carol (SHA-512)
    and alice (SHA-256, with a password other than her JAAS one)."""
    store = MetadataStore(str(tmp_path / "meta"))
    put(store, "carol", ScramCredential.from_password("SCRAM-SHA-512", "carol-secret"))
    put(store, "alice", ScramCredential.from_password("SCRAM-SHA-256", "alice-scram"))
    config = BrokerConfig.load([{"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}])
    yield Credentials(store.scram, config)
    store.close()


def put(store: MetadataStore, user: str, credential: ScramCredential) -> None:
    store.scram.put(
        user,
        StoredScramCredential(
            mechanism_type(credential.mechanism),
            credential.salt,
            credential.stored_key,
            credential.server_key,
            credential.iterations,
        ),
    )


def plain(credentials: Credentials, listener: str = LISTENER) -> SaslExchange:
    return start_exchange("PLAIN", listener, credentials)


def logged_in(credentials: Credentials, token: bytes, listener: str = LISTENER) -> str:
    """The user ``token`` authenticates; the answer must be empty."""
    exchange = plain(credentials, listener)
    assert not exchange.complete
    assert exchange.step(token) == b""
    assert exchange.complete
    return exchange.user


def refusal(credentials: Credentials, token: bytes, listener: str = LISTENER) -> str:
    exchange = plain(credentials, listener)
    with pytest.raises(AuthenticationFailed) as raised:
        exchange.step(token)
    assert not exchange.complete and exchange.user == ""
    return str(raised.value)


def test_jaas_users_log_in(credentials: Credentials) -> None:
    assert logged_in(credentials, b"\0admin\0admin-secret") == "admin"
    assert logged_in(credentials, b"\0alice\0alice-secret") == "alice"
    assert logged_in(credentials, b'\0quoted\0say "hi"') == "quoted"


def test_the_listener_name_is_matched_in_any_case(credentials: Credentials) -> None:
    assert logged_in(credentials, b"\0admin\0admin-secret", "sasl_plaintext") == "admin"


def test_an_authorization_id_must_be_the_users_own(credentials: Credentials) -> None:
    assert logged_in(credentials, b"alice\0alice\0alice-secret") == "alice"
    assert refusal(credentials, b"admin\0alice\0alice-secret") == (
        "Authentication failed: Client requested an authorization id that is different "
        "from username"
    )


def test_wrong_passwords_and_unknown_users_get_one_answer(credentials: Credentials) -> None:
    assert refusal(credentials, b"\0alice\0wrong") == INVALID
    assert refusal(credentials, b"\0nobody\0alice-secret") == INVALID
    assert refusal(credentials, b"\0carol\0wrong") == INVALID
    assert refusal(credentials, b"\0alice\0Alice-secret") == INVALID


def test_a_scram_user_logs_in_with_plain_on_any_listener(credentials: Credentials) -> None:
    assert logged_in(credentials, b"\0carol\0carol-secret") == "carol"
    assert logged_in(credentials, b"\0carol\0carol-secret", "SASL_SSL") == "carol"


def test_a_listeners_jaas_users_are_its_own(credentials: Credentials) -> None:
    assert refusal(credentials, b"\0admin\0admin-secret", "SASL_SSL") == INVALID


def test_the_jaas_password_of_a_user_is_the_only_one_on_its_listener(
    credentials: Credentials,
) -> None:
    assert refusal(credentials, b"\0alice\0alice-scram") == INVALID
    assert logged_in(credentials, b"\0alice\0alice-scram", "SASL_SSL") == "alice"


def test_an_empty_name_or_password_is_named(credentials: Credentials) -> None:
    assert refusal(credentials, b"\0\0admin-secret") == (
        "Authentication failed: username not specified"
    )
    assert refusal(credentials, b"\0admin\0") == "Authentication failed: password not specified"


@pytest.mark.parametrize(
    ("token", "count"),
    [(b"", 1), (b"admin", 1), (b"\0admin", 2), (b"a\0b\0c\0d", 4), (b"a\0b\0c\0d\0e\0f", 4)],
)
def test_a_token_of_other_than_three_fields_is_refused(
    credentials: Credentials, token: bytes, count: int
) -> None:
    # Kafka's PlainSaslServer.extractTokens counts at most four.
    assert refusal(credentials, token) == (
        f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}"
    )


def test_a_token_that_is_not_utf_8_or_too_large_is_refused(credentials: Credentials) -> None:
    assert "not UTF-8" in refusal(credentials, b"\0admin\0\xff")
    oversized = b"\0admin\0" + b"x" * MAX_TOKEN_BYTES
    assert f"over {MAX_TOKEN_BYTES} bytes" in refusal(credentials, oversized)


def test_plain_takes_one_token(credentials: Credentials) -> None:
    exchange = plain(credentials)
    exchange.step(b"\0admin\0admin-secret")
    with pytest.raises(AuthenticationFailed, match="one token"):
        exchange.step(b"\0admin\0admin-secret")
    assert exchange.complete and exchange.user == "admin"
    failed = plain(credentials)
    with pytest.raises(AuthenticationFailed):
        failed.step(b"\0admin\0wrong")
    with pytest.raises(AuthenticationFailed, match="one token"):
        failed.step(b"\0admin\0admin-secret")
    assert not failed.complete
