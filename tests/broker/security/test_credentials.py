"""Users' credentials (security/credentials.py, scram_credential.py): RFC 5802's keys
against RFC 7677's test vector, and KIP-554's describe and alter with Kafka's error codes
and messages (ScramControlManager, ScramImage), kept across a reopen."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from scramp import ScramClient

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.validators import ConfigError
from kshim.broker.security.credentials import Credentials
from kshim.broker.security.sasl.factory import start_exchange
from kshim.broker.security.scram_credential import (
    ScramCredential,
    new_salt,
    salted_password,
)
from kshim.client.jaas import JaasError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kshim.protocol.messages.describe_user_scram_credentials import CredentialInfo
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.scram_store import MAX_USER_BYTES

SHA_256, SHA_512 = 1, 2  # KIP-554's mechanism numbers
NAMES = {SHA_256: "SCRAM-SHA-256", SHA_512: "SCRAM-SHA-512"}
# RFC 7677 §3's example exchange (SCRAM-SHA-256, user "user", password "pencil").
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_AUTH_MESSAGE = (
    f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={RFC_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
    f"c=biws,r={RFC_NONCE}"
).encode()
RFC_PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(str(tmp_path / "meta"))
    yield opened
    opened.close()


@pytest.fixture
def credentials(store: MetadataStore) -> Credentials:
    return Credentials(store.scram, BrokerConfig.load([]))


def upsertion(
    name: str, mechanism: int = SHA_256, iterations: int = 4096, password: str = "secret"
) -> ScramCredentialUpsertion:
    """What Kafka's admin client sends: a fresh salt, and the password salted with it."""
    salt = new_salt()
    salted = salted_password(NAMES.get(mechanism, "SCRAM-SHA-256"), password, salt, iterations)
    return ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted
    )


def deletion(name: str, mechanism: int = SHA_256) -> ScramCredentialDeletion:
    return ScramCredentialDeletion(name=name, mechanism=mechanism)


def ok(user: str) -> AlterUserScramCredentialsResult:
    return AlterUserScramCredentialsResult(user=user, error_code=ErrorCode.none, error_message=None)


def refused(user: str, code: ErrorCode, message: str) -> AlterUserScramCredentialsResult:
    return AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)


def described(credentials: Credentials, *users: str) -> dict[str, object]:
    """user -> [(mechanism, iterations)], or (error name, message)."""
    answer: dict[str, object] = {}
    for result in credentials.describe(list(users) or None):
        if result.error_code == ErrorCode.none:
            answer[result.user] = [(i.mechanism, i.iterations) for i in result.credential_infos]
        else:
            answer[result.user] = (result.error_code.name, result.error_message)
    return answer


def test_the_keys_of_rfc_7677s_example() -> None:
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)
    signature = hmac.digest(credential.stored_key, RFC_AUTH_MESSAGE, "sha256")
    client_key = bytes(a ^ b for a, b in zip(RFC_PROOF, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    server_signature = hmac.digest(credential.server_key, RFC_AUTH_MESSAGE, "sha256")
    assert server_signature == RFC_SERVER_SIGNATURE
    salted = salted_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)
    assert ScramCredential.from_salted_password("SCRAM-SHA-256", RFC_SALT, salted, 4096) == (
        credential
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_credential_checks_its_password(mechanism: str) -> None:
    credential = ScramCredential.from_password(mechanism, "pässword", iterations=4096)
    assert credential.verify_password("pässword")
    assert not credential.verify_password("password")
    assert not credential.verify_password("")
    assert len(credential.salt) == 32 and credential.iterations == 4096
    assert credential.salt.hex() not in repr(credential)
    assert credential.stored_key.hex() not in repr(credential)


def test_a_credential_needs_a_known_mechanism_and_a_salted_password() -> None:
    with pytest.raises(ValueError, match="is not one of"):
        ScramCredential.from_password("SCRAM-SHA-1", "x")
    with pytest.raises(ValueError, match="empty"):
        ScramCredential.from_salted_password("SCRAM-SHA-256", b"salt" * 4, b"", 4096)


async def test_set_describe_and_delete(credentials: Credentials) -> None:
    assert described(credentials) == {}
    results = await credentials.alter([], [upsertion("alice"), upsertion("bob", SHA_512, 8192)])
    assert results == [ok("alice"), ok("bob")]
    assert described(credentials) == {"alice": [(SHA_256, 4096)], "bob": [(SHA_512, 8192)]}
    assert await credentials.alter([], [upsertion("alice", SHA_512, 16384)]) == [ok("alice")]
    assert described(credentials, "alice") == {"alice": [(SHA_256, 4096), (SHA_512, 16384)]}
    assert await credentials.alter([deletion("alice")], []) == [ok("alice")]
    assert described(credentials, "alice") == {"alice": [(SHA_512, 16384)]}
    assert credentials.scram("alice", "SCRAM-SHA-256") is None


async def test_a_set_credential_logs_in_with_its_password(credentials: Credentials) -> None:
    await credentials.alter([], [upsertion("alice", SHA_512, 8192, password="wonderland")])
    client = ScramClient(["SCRAM-SHA-512"], "alice", "wonderland")
    server = start_exchange("SCRAM-SHA-512", "SASL_SSL", credentials)
    client.set_server_first(server.step(client.get_client_first().encode()).decode())
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    assert (server.complete, server.user) == (True, "alice")
    assert credentials.check_plain("SASL_SSL", "alice", "wonderland")
    assert not credentials.check_plain("SASL_SSL", "alice", "wonderlan")


async def test_replacing_a_credential_changes_the_password(credentials: Credentials) -> None:
    await credentials.alter([], [upsertion("alice", password="old")])
    await credentials.alter([], [upsertion("alice", password="new")])
    assert credentials.check_plain("SASL_SSL", "alice", "new")
    assert not credentials.check_plain("SASL_SSL", "alice", "old")


async def test_changes_are_kept_across_a_reopen(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path / "meta"))
    first = Credentials(store.scram, BrokerConfig.load([]))
    await first.alter([], [upsertion("alice", password="kept"), upsertion("bob")])
    await first.alter([deletion("bob")], [])
    store.close()
    store = MetadataStore(str(tmp_path / "meta"))
    again = Credentials(store.scram, BrokerConfig.load([]))
    assert described(again) == {"alice": [(SHA_256, 4096)]}
    assert again.check_plain("PLAINTEXT", "alice", "kept")
    store.close()


async def test_describe_as_kafka(credentials: Credentials) -> None:
    await credentials.alter([], [upsertion("alice"), upsertion("bob")])
    assert described(credentials, "bob", "nobody", "alice", "bob", "alice", "bob") == {
        "bob": (
            "duplicate_resource",
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
        ),
        "nobody": (
            "resource_not_found",
            "Attempt to describe a user credential that does not exist: nobody",
        ),
        "alice": (
            "duplicate_resource",
            "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
        ),
    }
    assert [r.user for r in credentials.describe(["bob", "nobody", "alice"])] == [
        "bob",
        "nobody",
        "alice",
    ]
    [bob] = credentials.describe(["bob"])
    assert bob.credential_infos == [CredentialInfo(mechanism=SHA_256, iterations=4096)]
    assert [r.user for r in credentials.describe([])] == ["alice", "bob"]


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (upsertion("alice", iterations=4095), ErrorCode.unacceptable_credential, "Too few"),
        (upsertion("alice", iterations=16385), ErrorCode.unacceptable_credential, "Too many"),
        (upsertion("alice", mechanism=0), ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM"),
        (upsertion("alice", mechanism=3), ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM"),
        (upsertion(""), ErrorCode.unacceptable_credential, "Username must not be empty"),
        (upsertion("x" * (MAX_USER_BYTES + 1)), ErrorCode.unacceptable_credential, "at most"),
        (deletion("alice"), ErrorCode.resource_not_found, "that does not exist"),
        (deletion("alice", 3), ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM"),
        (deletion(""), ErrorCode.unacceptable_credential, "Username must not be empty"),
    ],
)
async def test_refusals(
    credentials: Credentials,
    change: ScramCredentialUpsertion | ScramCredentialDeletion,
    code: ErrorCode,
    message: str,
) -> None:
    if isinstance(change, ScramCredentialDeletion):
        [result] = await credentials.alter([change], [])
    else:
        [result] = await credentials.alter([], [change])
    assert (result.user, result.error_code) == (change.name, code)
    assert result.error_message is not None and message in result.error_message
    assert described(credentials) == {}


async def test_a_salt_or_salted_password_that_cannot_log_in_is_refused(
    credentials: Credentials,
) -> None:
    short_salt = upsertion("alice")
    short_salt.salt = b"s" * 11
    empty = upsertion("bob")
    empty.salted_password = b""
    results = await credentials.alter([], [short_salt, empty])
    assert [(r.user, r.error_code) for r in results] == [
        ("alice", ErrorCode.unacceptable_credential),
        ("bob", ErrorCode.unacceptable_credential),
    ]
    assert described(credentials) == {}


async def test_a_user_altered_twice_gets_duplicate_resource_and_no_change(
    credentials: Credentials,
) -> None:
    await credentials.alter([], [upsertion("alice"), upsertion("bob")])
    message = "A user credential cannot be altered twice in the same request"
    twice = refused("alice", ErrorCode.duplicate_resource, message)
    # Twice in one request, whatever the mechanisms, as Kafka's KRaft controller.
    assert await credentials.alter(
        [deletion("alice")], [upsertion("alice", SHA_512), upsertion("carol")]
    ) == [twice, ok("carol")]
    assert await credentials.alter([], [upsertion("alice", SHA_512), upsertion("alice")]) == [twice]
    assert await credentials.alter([deletion("alice"), deletion("alice", SHA_512)], []) == [twice]
    assert described(credentials) == {
        "alice": [(SHA_256, 4096)],
        "bob": [(SHA_256, 4096)],
        "carol": [(SHA_256, 4096)],
    }


async def test_a_users_first_refusal_stands(credentials: Credentials) -> None:
    # Kafka skips every later change of a user already refused, a duplicate included.
    [result] = await credentials.alter(
        [deletion("nobody"), deletion("nobody")], [upsertion("nobody")]
    )
    assert result.error_code == ErrorCode.resource_not_found


async def test_one_refused_user_does_not_stop_the_others(credentials: Credentials) -> None:
    results = await credentials.alter(
        [deletion("ghost")], [upsertion("alice"), upsertion("bob", iterations=1)]
    )
    assert [(r.user, r.error_code) for r in results] == [
        ("ghost", ErrorCode.resource_not_found),
        ("alice", ErrorCode.none),
        ("bob", ErrorCode.unacceptable_credential),
    ]
    assert described(credentials) == {"alice": [(SHA_256, 4096)]}


def test_plain_users_come_from_the_listeners_jaas_config(store: MetadataStore) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pw";'
    config = BrokerConfig.load([{"listener.name.sasl_ssl.plain.sasl.jaas.config": jaas}])
    credentials = Credentials(store.scram, config)
    assert credentials.check_plain("SASL_SSL", "a", "pw")
    assert not credentials.check_plain("SASL_SSL", "a", "pW")
    assert not credentials.check_plain("SASL_PLAINTEXT", "a", "pw")
    assert not credentials.check_plain("SASL_SSL", "b", "pw")


def test_a_malformed_jaas_config_is_refused_naming_its_key(store: MetadataStore) -> None:
    key = "listener.name.sasl_ssl.plain.sasl.jaas.config"
    unterminated = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pw"'
    # Refused as the configuration is loaded, before any broker starts.
    with pytest.raises(ConfigError, match=f"^{re.escape(key)}: .*semicolon"):
        BrokerConfig.load([{key: unterminated}])
    # A configuration that bypassed the check is refused by the credentials as well.
    config = BrokerConfig({**BrokerConfig.load([]).values, key: unterminated})
    with pytest.raises(JaasError, match=f"^{re.escape(key)}: .*semicolon"):
        Credentials(store.scram, config)
