"""The SCRAM-SHA-256 and SCRAM-SHA-512 server (security/sasl/scram.py), sans-io: whole
exchanges against scramp's client and against a client written here from RFC 5802 alone
(so that a bug shared by scramp's two sides would still show), and every way a client can
get it wrong: a wrong password, an unknown user, a nonce that is not the exchange's, a
client-final replayed on a new exchange, malformed messages, Kafka's SCRAM extensions.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from scramp import ScramClient

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.credentials import Credentials
from kshim.broker.security.sasl.errors import MAX_TOKEN_BYTES, AuthenticationFailed
from kshim.broker.security.sasl.factory import start_exchange
from kshim.broker.security.sasl.scram import ScramExchange
from kshim.broker.security.scram_credential import ScramCredential
from kshim.broker.security.session import SaslExchange
from kshim.protocol.scram_mechanisms import mechanism_type
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.scram_store import StoredScramCredential

SHA_256, SHA_512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
LISTENER = "SASL_PLAINTEXT"
PASSWORDS = {"alice": "alice-secret", "a,b=c": "odd-name-secret", "ünï": "pässword"}
ALICE_ITERATIONS = 8192


def invalid_credentials(mechanism: str) -> str:
    return (
        "Authentication failed during authentication due to invalid credentials with "
        f"SASL mechanism {mechanism}"
    )


@pytest.fixture
def credentials(tmp_path: Path) -> Iterator[Credentials]:
    """alice, ``a,b=c`` and ``ünï`` with credentials of both mechanisms (alice's of 8192
    iterations); bob with a SCRAM-SHA-512 one only."""
    store = MetadataStore(str(tmp_path / "meta"))
    for user, password in PASSWORDS.items():
        for mechanism in (SHA_256, SHA_512):
            iterations = ALICE_ITERATIONS if user == "alice" else 4096
            put(store, user, ScramCredential.from_password(mechanism, password, None, iterations))
    put(store, "bob", ScramCredential.from_password(SHA_512, "bob-secret"))
    yield Credentials(store.scram, BrokerConfig.load([]))
    store.close()


def put(store: MetadataStore, user: str, credential: ScramCredential) -> None:
    stored = StoredScramCredential(
        mechanism_type(credential.mechanism),
        credential.salt,
        credential.stored_key,
        credential.server_key,
        credential.iterations,
    )
    store.scram.put(user, stored)


def exchange(credentials: Credentials, mechanism: str = SHA_256) -> SaslExchange:
    return start_exchange(mechanism, LISTENER, credentials)


def scramp_login(credentials: Credentials, mechanism: str, user: str, password: str) -> str:
    """Runs a whole exchange with scramp's client; returns the authenticated user."""
    client = ScramClient([mechanism], user, password)
    server = exchange(credentials, mechanism)
    server_first = server.step(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    assert not server.complete
    server_final = server.step(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # checks the server's signature
    assert server.complete
    return server.user


@dataclass
class Rfc5802Client:
    """A SCRAM client from RFC 5802 §3 and §7, by hand: no SASLprep, no channel binding."""

    mechanism: str
    user: str
    password: str
    nonce: str = "fyko+d2lbbFgONRv9qkxdawL"
    gs2_header: str = "n,,"
    extensions: str = ""  # appended to client-first-bare, e.g. ",tokenauth=true"
    bare: str = ""
    server_signature: bytes = b""
    salt: bytes = b""
    iterations: int = 0

    @property
    def hash_name(self) -> str:
        return {SHA_256: "sha256", SHA_512: "sha512"}[self.mechanism]

    def client_first(self) -> bytes:
        escaped = self.user.replace("=", "=3D").replace(",", "=2C")
        self.bare = f"n={escaped},r={self.nonce}{self.extensions}"
        return (self.gs2_header + self.bare).encode()

    def client_final(self, server_first: bytes, nonce: str | None = None) -> bytes:
        """The client-final answering ``server_first``, naming ``nonce`` (default: the
        combined nonce the server sent)."""
        text = server_first.decode()
        fields = dict(field.split("=", 1) for field in text.split(","))
        assert fields["r"].startswith(self.nonce) and len(fields["r"]) > len(self.nonce)
        self.salt, self.iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(
            self.hash_name, self.password.encode(), self.salt, self.iterations
        )
        client_key = hmac.digest(salted, b"Client Key", self.hash_name)
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        channel_binding = base64.b64encode(self.gs2_header.encode()).decode()
        without_proof = f"c={channel_binding},r={nonce or fields['r']}"
        auth_message = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self.hash_name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self.hash_name)
        self.server_signature = hmac.digest(server_key, auth_message, self.hash_name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check_server_final(self, server_final: bytes) -> None:
        assert server_final.decode() == f"v={base64.b64encode(self.server_signature).decode()}"


def login(credentials: Credentials, client: Rfc5802Client) -> SaslExchange:
    server = exchange(credentials, client.mechanism)
    server_first = server.step(client.client_first())
    client.check_server_final(server.step(client.client_final(server_first)))
    return server


def failure(server: SaslExchange, token: bytes) -> str:
    with pytest.raises(AuthenticationFailed) as raised:
        server.step(token)
    return str(raised.value)


@pytest.mark.parametrize("mechanism", [SHA_256, SHA_512])
@pytest.mark.parametrize("user", sorted(PASSWORDS))
def test_scramp_client_logs_in(credentials: Credentials, mechanism: str, user: str) -> None:
    assert scramp_login(credentials, mechanism, user, PASSWORDS[user]) == user


@pytest.mark.parametrize("mechanism", [SHA_256, SHA_512])
def test_rfc_5802_client_logs_in_with_the_stored_salt_and_iterations(
    credentials: Credentials, mechanism: str
) -> None:
    client = Rfc5802Client(mechanism, "alice", "alice-secret")
    server = login(credentials, client)
    assert (server.complete, server.user) == (True, "alice")
    stored = credentials.scram("alice", mechanism)
    assert stored is not None
    assert (client.salt, client.iterations) == (stored.salt, ALICE_ITERATIONS)


def test_an_escaped_name_is_the_users_name(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "a,b=c", "odd-name-secret")
    assert client.client_first().startswith(b"n,,n=a=2Cb=3Dc,")
    assert login(credentials, client).user == "a,b=c"


def test_gs2_flag_y_is_taken_without_channel_binding(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret", gs2_header="y,,")
    assert login(credentials, client).complete


@pytest.mark.parametrize("mechanism", [SHA_256, SHA_512])
def test_a_wrong_password_fails_at_the_proof(credentials: Credentials, mechanism: str) -> None:
    client = Rfc5802Client(mechanism, "alice", "wrong")
    server = exchange(credentials, mechanism)
    final = client.client_final(server.step(client.client_first()))
    assert failure(server, final) == invalid_credentials(mechanism)
    assert not server.complete and server.user == ""


def test_an_unknown_user_is_answered_as_a_known_one_and_fails_as_a_wrong_password(
    credentials: Credentials,
) -> None:
    answers = []
    for _ in range(2):
        client = Rfc5802Client(SHA_256, "mallory", "guess")
        server = exchange(credentials)
        server_first = server.step(client.client_first())
        answers.append(server_first)
        assert failure(server, client.client_final(server_first)) == invalid_credentials(SHA_256)
    # RFC 5802 §5.1: the same made-up salt each time, of a real salt's length, and
    # Kafka's default count, so that asking twice does not tell a made-up user apart.
    salts = [dict(f.split("=", 1) for f in a.decode().split(","))["s"] for a in answers]
    assert salts[0] == salts[1]
    assert len(base64.b64decode(salts[0])) == 32
    assert answers[0].decode().endswith(",i=4096")
    other = Rfc5802Client(SHA_256, "eve", "guess")
    other_first = exchange(credentials).step(other.client_first())
    assert dict(f.split("=", 1) for f in other_first.decode().split(","))["s"] != salts[0]


def test_a_user_without_a_credential_of_this_mechanism_is_unknown_to_it(
    credentials: Credentials,
) -> None:
    assert scramp_login(credentials, SHA_512, "bob", "bob-secret") == "bob"
    client = Rfc5802Client(SHA_256, "bob", "bob-secret")
    server = exchange(credentials, SHA_256)
    final = client.client_final(server.step(client.client_first()))
    assert failure(server, final) == invalid_credentials(SHA_256)


def test_a_client_final_with_another_nonce_fails(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret")
    server = exchange(credentials)
    server_first = server.step(client.client_first())
    final = client.client_final(server_first, nonce=client.nonce + "someone-elses")
    assert "nonce" in failure(server, final)


def test_old_librdkafkas_client_nonce_before_the_combined_one_is_accepted(
    credentials: Credentials,
) -> None:
    # librdkafka before 2.6.1 (librdkafka#4895) sends r=<client nonce><combined nonce>;
    # Kafka 3.8.1-3.9 accept it, as kshim does: the server's part still ends the nonce.
    client = Rfc5802Client(SHA_256, "alice", "alice-secret")
    server = exchange(credentials)
    server_first = server.step(client.client_first())
    combined = dict(field.split("=", 1) for field in server_first.decode().split(","))["r"]
    final = client.client_final(server_first, nonce=client.nonce + combined)
    client.check_server_final(server.step(final))
    assert server.complete


def test_a_nonce_not_ending_with_the_servers_fails_even_if_longer(
    credentials: Credentials,
) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret")
    server = exchange(credentials)
    server_first = server.step(client.client_first())
    combined = dict(field.split("=", 1) for field in server_first.decode().split(","))["r"]
    final = client.client_final(server_first, nonce=combined + "tail")
    assert "nonce" in failure(server, final)


def test_a_client_final_replayed_on_a_new_exchange_fails(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret")
    first = exchange(credentials)
    client_first = client.client_first()
    client_final = client.client_final(first.step(client_first))
    client.check_server_final(first.step(client_final))
    # A listener on the wire replays both of alice's messages: the new exchange has a
    # nonce of its own, so the old proof does not answer it.
    replayed = exchange(credentials)
    replayed.step(client_first)
    message = failure(replayed, client_final)
    assert message.startswith("Authentication failed")
    assert not replayed.complete


@pytest.mark.parametrize(
    ("extensions", "expected"),
    [
        (",tokenauth=true", "delegation tokens are not supported"),
        (",tokenauth=true,traceId=1", "delegation tokens are not supported"),
        (",traceId=1", "SCRAM extensions are not supported: traceId"),
    ],
)
def test_kafka_scram_extensions_are_refused_clearly(
    credentials: Credentials, extensions: str, expected: str
) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret", extensions=extensions)
    server = exchange(credentials)
    assert expected in failure(server, client.client_first())
    assert "Authentication failed" in failure(server, b"anything")  # it has failed for good


def test_an_authorization_id_is_refused_clearly(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret", gs2_header="n,a=alice,")
    assert "authorization id" in failure(exchange(credentials), client.client_first())


def test_channel_binding_is_refused(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret", gs2_header="p=tls-unique,,")
    message = failure(exchange(credentials), client.client_first())
    assert message.startswith("Authentication failed: invalid SCRAM client-first message")


@pytest.mark.parametrize(
    "client_first",
    [
        b"",
        b"garbage",
        b"n,,n=alice",
        b"n,,r=nonce,n=alice",
        b"x,,n=alice,r=nonce",
        b"n,,n=al=ice,r=nonce",
        b"n,,n=alice,r=",
        b"n,,n=alice,r=nonce,m=reserved",
        b"n,,n=\xff,r=nonce",
        b"n,,n=alice,r=" + b"n" * MAX_TOKEN_BYTES,
    ],
)
def test_malformed_client_first_fails(credentials: Credentials, client_first: bytes) -> None:
    assert failure(exchange(credentials), client_first).startswith("Authentication failed")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda final: b"garbage",
        lambda final: final.replace(b"c=biws", b"c=eSws"),  # says y,, after n,,
        lambda final: final.replace(b"c=biws", b"c=%%%"),
        lambda final: final.rpartition(b",p=")[0],  # no proof
        lambda final: final.rpartition(b",p=")[0] + b",p=AAAA",  # a proof too short
        lambda final: final.rpartition(b",p=")[0] + b",p=not base64!",
        lambda final: final + b",x=extra",
    ],
)
def test_malformed_client_final_fails(credentials: Credentials, mangle: object) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret")
    server = exchange(credentials)
    final = client.client_final(server.step(client.client_first()))
    assert callable(mangle)
    assert failure(server, mangle(final)).startswith("Authentication failed")
    assert not server.complete


def test_no_step_after_the_exchange_completes(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "alice", "alice-secret")
    server = login(credentials, client)
    assert "complete" in failure(server, client.client_first())
    assert server.complete and server.user == "alice"


def test_no_step_after_the_exchange_failed(credentials: Credentials) -> None:
    client = Rfc5802Client(SHA_256, "alice", "wrong")
    server = exchange(credentials)
    final = client.client_final(server.step(client.client_first()))
    failure(server, final)
    assert "failed" in failure(server, final)


def test_unknown_mechanisms_are_refused(credentials: Credentials) -> None:
    for mechanism in ("SCRAM-SHA-1", "GSSAPI", "OAUTHBEARER", "scram-sha-256"):
        with pytest.raises(ValueError, match="is not one of"):
            start_exchange(mechanism, LISTENER, credentials)
    with pytest.raises(ValueError):
        ScramExchange("PLAIN", credentials)
