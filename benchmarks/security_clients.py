"""The broker and the clients of ``benchmarks.security``: one kshim with a PLAINTEXT and a
SASL_SSL listener, librdkafka's settings for each, and the workers that open connections
and flood the broker with wrong passwords, each in a process of its own (so that their
Python threads do not share a GIL with the producer measured beside them).

Certificates are made afresh with trustme (a CA and a server certificate for 127.0.0.1);
the SCRAM user is stored through AlterUserScramCredentials (KIP-554), the PLAIN user comes
from the listener's JAAS config, as in tests/e2e/security_support.py.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import secrets
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography.hazmat.primitives import serialization

from benchmarks.brokers import START_TIMEOUT_S, RunningBroker
from benchmarks.startup import API_VERSIONS_V0, answers_api_versions
from kshim.client.frames import encode_request
from kshim.client.sasl_login import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kshim.client.security import ClientSecurity, client_security
from kshim.client.wire import WireConnection, parse_bootstrap
from kshim.testing import free_port

PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "bench", "bench-secret"
SCRAM_MECHANISM = "SCRAM-SHA-256"
SCRAM_ITERATIONS = 4096  # Kafka's minimum and its tools' default
WRONG_PASSWORD = "not-the-password"
CONNECT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SecureBroker:
    """Where the benchmark's broker listens, and what its clients log in with."""

    plaintext: str  # host:port
    sasl_ssl: str
    ca: str  # the PEM file of the CA that signed the broker's certificate


def make_certificates(directory: Path) -> tuple[str, str]:
    """(the broker's keystore: its PKCS#8 key and certificate chain, the CA's certificate):
    PEM files written into ``directory``. trustme writes keys in OpenSSL's traditional
    form, which Kafka's PEM keystores (KIP-651) do not read; Python's ssl reads either."""
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    keystore, ca = directory / "server.pem", directory / "ca.pem"
    keystore.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    authority.cert_pem.write_to_path(str(ca))
    return str(keystore), str(ca)


@contextlib.contextmanager
def running_secure(
    directory: Path, certificates: tuple[str, str] | None = None
) -> Iterator[tuple[RunningBroker, SecureBroker]]:
    """A ``kshim serve`` with PLAINTEXT and SASL_SSL listeners, its data in ``directory``,
    its standard error in ``directory/broker.err``, its certificates ``certificates``
    (make_certificates's pair) or new ones in ``directory``; stopped with SIGTERM when the
    block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    keystore, ca = certificates or make_certificates(directory)
    ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
    )
    settings = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.location": keystore,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "kshim.metrics.listen": "",
    }
    command = [sys.executable, "-m", "kshim", "serve", "--data-dir", str(directory / "data")]
    command += ["--log-level", "WARNING"]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    with open(directory / "broker.err", "wb") as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        while not answers_api_versions(ports["PLAINTEXT"]):
            if process.poll() is not None or time.perf_counter() - started > START_TIMEOUT_S:
                raise RuntimeError(f"kshim did not start: see {directory / 'broker.err'}")
            time.sleep(0.01)
        plaintext = f"127.0.0.1:{ports['PLAINTEXT']}"
        broker = RunningBroker(
            "kshim", plaintext, process.pid, str(directory / "data"), process,
            time.perf_counter() - started,
        )  # fmt: skip
        secure = SecureBroker(plaintext, f"127.0.0.1:{ports['SASL_SSL']}", ca)
        add_scram_user(secure)
        yield broker, secure
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


def add_scram_user(secure: SecureBroker) -> None:
    """Stores SCRAM_USER's SCRAM-SHA-256 credential through the PLAINTEXT listener."""
    admin = AdminClient({"bootstrap.servers": secure.plaintext})
    upsertion = UserScramCredentialUpsertion(
        SCRAM_USER,
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, SCRAM_ITERATIONS),
        SCRAM_PASSWORD.encode(),
    )
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(timeout=CONNECT_TIMEOUT_S)


def librdkafka_settings(secure: SecureBroker, protocol: str) -> dict[str, Any]:
    """confluent-kafka settings for a client of ``protocol``'s listener (SASL_SSL: the
    SCRAM-SHA-256 user; the broker's certificate checked against 127.0.0.1)."""
    if protocol == "PLAINTEXT":
        return {"bootstrap.servers": secure.plaintext}
    return {
        "bootstrap.servers": secure.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": secure.ca,
        "sasl.mechanisms": SCRAM_MECHANISM,
        "sasl.username": SCRAM_USER,
        "sasl.password": SCRAM_PASSWORD,
    }


@dataclass(frozen=True, slots=True)
class ReusedContext(ClientSecurity):
    """kshim's client security with one TLS context for every connection: loading the CA
    for each (what a fresh ClientSecurity does, 1.2 ms) is the client's cost, not the
    broker's, and would slow the clients that measure the broker."""

    context: ssl.SSLContext | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        return self.context


def tls_security(ca: str) -> ReusedContext:
    base = client_security({"security.protocol": "SSL", "ssl.truststore.location": ca})
    return ReusedContext(base.protocol, base.tls, context=base.ssl_context())


# What each kind of connection does, once connected: (TLS, SASL mechanism, user, password).
CONNECTION_KINDS: dict[str, tuple[bool, str | None, str, str]] = {
    "PLAINTEXT + ApiVersions": (False, None, "", ""),
    "TLS + ApiVersions": (True, None, "", ""),
    "SASL_SSL PLAIN login + ApiVersions": (True, "PLAIN", PLAIN_USER, PLAIN_PASSWORD),
    "SASL_SSL SCRAM-SHA-256 login + ApiVersions": (
        True,
        SCRAM_MECHANISM,
        SCRAM_USER,
        SCRAM_PASSWORD,
    ),
}


def connection_worker(secure: SecureBroker, kind: str, count: int) -> dict[str, float]:
    """Opens ``count`` connections of ``kind`` one after another, each answered an
    ApiVersions and closed; returns the seconds taken and this process's CPU seconds. Runs
    in a worker process."""
    uses_tls, mechanism, user, password = CONNECTION_KINDS[kind]
    address = secure.sasl_ssl if uses_tls else secure.plaintext
    host, port = parse_bootstrap(address)
    security = tls_security(secure.ca) if uses_tls else None
    cpu, started = time.process_time(), time.perf_counter()
    for _ in range(count):
        with WireConnection(host, port, CONNECT_TIMEOUT_S, security=security) as conn:
            if mechanism is not None:
                conn.authenticate(mechanism, user, password)
            conn.send(API_VERSIONS_V0)
            conn.read_frame()
    return {"seconds": time.perf_counter() - started, "client_cpu_s": time.process_time() - cpu}


# The wrong-password floods: (mechanism, user). PLAIN for a SCRAM user is checked against
# the stored credential, one Hi() (4,096 HMACs) on the broker per attempt.
# A flood's name: its mechanism, the user guessed at, and how long the guesser waits for
# the broker before it gives up on a connection and makes another (None: it waits, as
# Kafka's clients do, for the broker's answer and then for the broker to close).
FLOODS: dict[str, tuple[str, str, float | None]] = {
    "SCRAM-SHA-256, a SCRAM user": (SCRAM_MECHANISM, SCRAM_USER, None),
    "PLAIN, a JAAS user": ("PLAIN", PLAIN_USER, None),
    "PLAIN, a SCRAM user": ("PLAIN", SCRAM_USER, None),
    "PLAIN, a JAAS user, giving up after 0.2 s": ("PLAIN", PLAIN_USER, 0.2),
}


class RepeatedGuess:
    """The client side of a login with one wrong password, sent again and again: PLAIN's
    one token (RFC 4616), or SCRAM's exchange (RFC 5802 §3) with its SaltedPassword (Hi(),
    4,096 HMACs) computed once per salt, as a flooding client would. The flood then costs
    its sender little beyond TLS, and the broker's side is what is measured. Thread-safe
    (a lost race computes the same value twice)."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self._mechanism = mechanism
        self._digest = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        self._user = user
        self._password = password.encode()
        self._salted: dict[tuple[bytes, int], bytes] = {}

    def login(self, conn: WireConnection) -> str:
        """One exchange on ``conn``; the broker's error message, or ``accepted``."""
        handshake = conn.call(*SASL_HANDSHAKE, {"mechanism": self._mechanism})
        if handshake.error_code:
            return f"SaslHandshake error {handshake.error_code}"
        if self._mechanism == "PLAIN":
            token = b"\0" + self._user.encode() + b"\0" + self._password
            answer = conn.call(*SASL_AUTHENTICATE, {"auth_bytes": token})
            return str(answer.error_message) if answer.error_code else "accepted"
        client_first_bare = f"n={self._user},r={secrets.token_hex(32)}"
        answer = conn.call(*SASL_AUTHENTICATE, {"auth_bytes": f"n,,{client_first_bare}".encode()})
        if answer.error_code:
            return str(answer.error_message)
        server_first = answer.auth_bytes.decode()
        fields = dict(field.split("=", 1) for field in server_first.split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = self._salted.get((salt, iterations))
        if salted is None:
            salted = hashlib.pbkdf2_hmac(self._digest, self._password, salt, iterations)
            self._salted[salt, iterations] = salted
        without_proof = f"c=biws,r={fields['r']}"
        message = f"{client_first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        stored_key = hashlib.new(self._digest, client_key).digest()
        signature = hmac.digest(stored_key, message, self._digest)
        proof = bytes(key ^ mask for key, mask in zip(client_key, signature, strict=True))
        final = f"{without_proof},p={base64.b64encode(proof).decode()}"
        answer = conn.call(*SASL_AUTHENTICATE, {"auth_bytes": final.encode()})
        return str(answer.error_message) if answer.error_code else "accepted"


# The guesses come from another loopback address than the producer's: one peer guessing,
# another working, as the failed-login throttle tells them apart.
GUESSER = "127.0.0.2"


def flood_worker(
    secure: SecureBroker, flood: str, attempts: int, concurrency: int
) -> dict[str, Any]:
    """``attempts`` logins with a wrong password on the SASL_SSL listener, ``concurrency``
    at a time, each waiting for the broker to close the connection as Kafka's clients do
    (or giving up after the flood's patience); returns how each ended (the broker's
    refusal, counted by message), the seconds taken and this process's CPU seconds. Runs in
    a worker process."""
    mechanism, user, patience_s = FLOODS[flood]
    timeout_s = CONNECT_TIMEOUT_S if patience_s is None else patience_s
    host, port = parse_bootstrap(secure.sasl_ssl)
    security = tls_security(secure.ca)
    guess = RepeatedGuess(mechanism, user, WRONG_PASSWORD)

    def attempt(_: int) -> str:
        try:
            connection = WireConnection(
                host, port, timeout_s, security=security, source_host=GUESSER
            )
        except TimeoutError:
            return "gave up"
        except OSError:
            # The broker's failed-login throttle closed it before its TLS handshake.
            return "closed before TLS"
        with connection as conn:
            try:
                refusal = guess.login(conn)
                if refusal != "accepted" and patience_s is None:
                    conn.wait_closed(CONNECT_TIMEOUT_S)
            except TimeoutError:
                return "gave up"
            return refusal

    cpu, started = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        outcomes = Counter(pool.map(attempt, range(attempts)))
    return {
        "outcomes": dict(outcomes),
        "seconds": time.perf_counter() - started,
        "client_cpu_s": time.process_time() - cpu,
    }


def ready() -> bool:
    """A no-op for a worker process to run once, so that its start and imports are paid
    before anything is timed."""
    return True


# --- raw requests, the broker's side alone -----------------------------------------------


def raw_security(secure: SecureBroker, protocol: str) -> ClientSecurity | None:
    """kshim's wire client's security for ``protocol``'s listener (SASL_SSL: the
    SCRAM-SHA-256 user)."""
    if protocol == "PLAINTEXT":
        return None
    return client_security(
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.location": secure.ca,
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": SCRAM_USER,
            "sasl.password": SCRAM_PASSWORD,
        }
    )


def raw_fetch(topic: str, max_bytes: int = 1 << 20) -> bytes:
    """A size-prefixed Fetch request (v11) for the first ``max_bytes`` of partition 0, as a
    consumer reading from offset 0 sends it (librdkafka's max.partition.fetch.bytes)."""
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "log_start_offset": -1,
        "partition_max_bytes": max_bytes,
    }
    fields = {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 50 << 20,
              "isolation_level": 0, "session_id": 0, "session_epoch": -1,
              "topics": [{"topic": topic, "partitions": [partition]}],
              "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip
    return encode_request(1, 11, 1, fields)
