"""A real ``kshim serve`` with every kind of listener, the certificates and users its
clients log in with, and each connection setting as every client spells it.

Listeners: PLAINTEXT (the tests' own admin connection), SSL (server certificate only),
SASL_PLAINTEXT and SASL_SSL (PLAIN users from the listener's JAAS config, SCRAM users
stored with AlterUserScramCredentials) and MTLS, an SSL listener that requires a client
certificate (Kafka's ``listener.name.<l>.ssl.client.auth=required``). The authoriser is
on and only the principals below are super users, so a principal the broker derives
wrongly shows as an authorisation error. Certificates come from ``trustme``, made afresh
in a temporary directory: no key is ever committed.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
from collections.abc import Iterator, Mapping
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

from kshim.testing import START_TIMEOUT_S, BrokerProcess, free_port, wait_for_port

ADMIN_TIMEOUT_S = 20.0
WAIT_S = 20.0  # for anything a client does against a broker that is up
REQUEST_TIMEOUT_MS = 10_000
# How long a refused client keeps trying before it gives up: every refusal here is
# answered within milliseconds, so this only bounds the test.
REFUSAL_WAIT_MS = 1500
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "sam", "sam-secret"
# Users who log in but are no super users: what they may do shows their principal.
OTHER_PLAIN_USER, OTHER_PLAIN_PASSWORD = "bob", "bob-secret"
OTHER_SCRAM_USER, OTHER_SCRAM_PASSWORD = "steve", "steve-secret"
SCRAM_ITERATIONS = 4096  # Kafka's minimum, and its tools' default
CLIENT_NAME = "client-one"  # the common name of the client certificate the broker trusts
# Same CA, so the TLS handshake succeeds; the principal it maps to is no super user.
STRANGER_NAME = "stranger"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka's SslPrincipalMapper rule syntax (KIP-371): the common name alone, as the principal.
PRINCIPAL_MAPPING_RULES = "RULE:^CN=([a-z0-9-]+),.*$/$1/,DEFAULT"
# The principals allowed everything: ANONYMOUS is what PLAINTEXT and SSL without a client
# certificate connect as (Kafka's DefaultKafkaPrincipalBuilder).
SUPER_USERS = ("ANONYMOUS", PLAIN_USER, SCRAM_USER, CLIENT_NAME)
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS")
PROTOCOL_MAP = {name: name for name in LISTENERS[:-1]} | {"MTLS": "SSL"}


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    certificate: str  # PEM file: the leaf and its chain
    key: str  # PEM file: its private key


@dataclass(frozen=True, slots=True)
class Certificates:
    """PEM files: the CA clients trust, one they should not, the broker's keystore, and
    two client certificates of the trusted CA."""

    ca: str
    other_ca: str
    server_keystore: str
    client: ClientCertificate
    stranger: ClientCertificate


def make_certificates(directory: Path) -> Certificates:
    """Writes a fresh CA, a server certificate for 127.0.0.1 and localhost, and client
    certificates with the common names CLIENT_NAME and STRANGER_NAME, into ``directory``."""
    authority = trustme.CA()
    server = authority.issue_cert("127.0.0.1", "localhost")
    paths = {name: str(directory / f"{name}.pem") for name in ("ca", "other-ca", "server")}
    authority.cert_pem.write_to_path(paths["ca"])
    trustme.CA().cert_pem.write_to_path(paths["other-ca"])
    server.private_key_and_cert_chain_pem.write_to_path(paths["server"])
    return Certificates(
        paths["ca"],
        paths["other-ca"],
        paths["server"],
        _client_certificate(authority, CLIENT_NAME, directory),
        _client_certificate(authority, STRANGER_NAME, directory),
    )


def _client_certificate(authority: trustme.CA, name: str, directory: Path) -> ClientCertificate:
    leaf = authority.issue_cert(name, common_name=name)
    certificate, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    # The leaf first, then its issuers: what every client sends as its chain.
    certificate.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(key))
    return ClientCertificate(str(certificate), str(key))


def broker_settings(certificates: Certificates, ports: Mapping[str, int]) -> dict[str, str]:
    """The broker's configuration, under Kafka's key names."""
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{PLAIN_USER}="{PLAIN_PASSWORD}" '
        f'user_{OTHER_PLAIN_USER}="{OTHER_PLAIN_PASSWORD}";'
    )
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in LISTENERS),
        "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in PROTOCOL_MAP.items()),
        "ssl.keystore.location": certificates.server_keystore,
        "ssl.truststore.location": certificates.ca,
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": PRINCIPAL_MAPPING_RULES,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": ";".join(f"User:{name}" for name in SUPER_USERS),
        "group.initial.rebalance.delay.ms": "0",
        "kshim.metrics.listen": "",
        "kshim.full.view.process": "false",
        # These tests refuse logins on purpose, all from 127.0.0.1: the failed-login
        # throttle would soon close that address's new connections (its own tests are in
        # tests/server/security/test_login_throttle_e2e.py).
        "kshim.failed.authentication.burst": "0",
    }


class SecureBroker(BrokerProcess):
    """A ``kshim serve`` child with every listener of LISTENERS on a port of its own;
    ``port`` and ``bootstrap`` are its PLAINTEXT listener's."""

    def __init__(self, data_dir: Path, certificates: Certificates) -> None:
        self.ports = {name: free_port() for name in LISTENERS}
        self.certificates = certificates
        self._admin: AdminClient | None = None
        settings = broker_settings(certificates, self.ports)
        super().__init__(
            data_dir, [f"{k}={v}" for k, v in settings.items()], self.ports["PLAINTEXT"]
        )

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def start(self) -> SecureBroker:
        """Starts the process and waits until every listener accepts connections (no
        ``--listen``: it would replace ``listeners``)."""
        command = [sys.executable, "-m", "kshim", "serve", "--data-dir", self.data_dir]
        for setting in self.settings:
            command += ["--set", setting]
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            for port in self.ports.values():
                wait_for_port("127.0.0.1", port, START_TIMEOUT_S)
        except TimeoutError:
            self.kill()
            raise
        return self

    def stop(self) -> None:
        """Drops the admin client first: left over, it would keep reconnecting (and
        logging) after the broker has gone."""
        self._admin = None
        super().stop()

    def admin(self) -> AdminClient:
        """The librdkafka admin client on the PLAINTEXT listener, one for the broker's life
        (librdkafka abandons the requests of a client that is collected)."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def add_scram_user(self, user: str, password: str) -> None:
        """Stores ``user``'s SCRAM-SHA-256 and SCRAM-SHA-512 credentials of ``password``
        through AlterUserScramCredentials (KIP-554), as ``kafka-configs.sh`` does: one
        request per mechanism, since Kafka refuses a user named twice in one request."""
        admin = self.admin()
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            upsertion = UserScramCredentialUpsertion(
                user, ScramCredentialInfo(mechanism, SCRAM_ITERATIONS), password.encode()
            )
            for future in admin.alter_user_scram_credentials([upsertion]).values():
                future.result(timeout=ADMIN_TIMEOUT_S)


@dataclass(frozen=True, slots=True)
class Login:
    """How a client connects: a listener, and what it proves itself with."""

    listener: str
    mechanism: str | None = None  # SASL mechanism on a SASL listener
    user: str = ""
    password: str = ""
    trusts_other_ca: bool = False  # the client trusts a CA that did not sign the broker's
    identity: str | None = None  # the client certificate it sends: "client" or "stranger"

    @property
    def security_protocol(self) -> str:
        return PROTOCOL_MAP[self.listener]

    @property
    def uses_scram(self) -> bool:
        return (self.mechanism or "").startswith("SCRAM-")


def sasl(listener: str, mechanism: str, user: str, password: str) -> Login:
    return Login(listener, mechanism, user, password)


def super_user_login(listener: str, mechanism: str) -> Login:
    """A login as the super user of ``mechanism``."""
    if mechanism == "PLAIN":
        return sasl(listener, mechanism, PLAIN_USER, PLAIN_PASSWORD)
    return sasl(listener, mechanism, SCRAM_USER, SCRAM_PASSWORD)


# Every way in that must work, by test id.
LOGINS = {
    "ssl": Login("SSL"),
    "sasl_plaintext-plain": super_user_login("SASL_PLAINTEXT", "PLAIN"),
    "sasl_plaintext-scram-sha-256": super_user_login("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    "sasl_plaintext-scram-sha-512": super_user_login("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    "sasl_ssl-plain": super_user_login("SASL_SSL", "PLAIN"),
    "sasl_ssl-scram-sha-256": super_user_login("SASL_SSL", "SCRAM-SHA-256"),
    "sasl_ssl-scram-sha-512": super_user_login("SASL_SSL", "SCRAM-SHA-512"),
    "mtls": Login("MTLS", identity="client"),
}
# Logins that authenticate as a principal that is no super user (and has no ACL on the
# topics the denial tests use).
UNAUTHORISED_LOGINS = {
    "mtls-stranger": Login("MTLS", identity="stranger"),
    "sasl_plaintext-plain-bob": sasl(
        "SASL_PLAINTEXT", "PLAIN", OTHER_PLAIN_USER, OTHER_PLAIN_PASSWORD
    ),
    "sasl_ssl-scram-sha-512-steve": sasl(
        "SASL_SSL", "SCRAM-SHA-512", OTHER_SCRAM_USER, OTHER_SCRAM_PASSWORD
    ),
}
# Kafka's own wording (PlainServerCallbackHandler; ScramSaslServer through
# SaslServerAuthenticator), which the broker sends in SaslAuthenticate's error_message.
PLAIN_REFUSED = "Authentication failed: Invalid username or password"
SCRAM_REFUSED = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism {mechanism}"
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A login the broker must refuse, and why: ``sasl`` (SaslAuthenticate answers an
    error), ``untrusted-server`` (the client cannot verify the broker's certificate) or
    ``no-client-certificate`` (the mTLS listener ends the handshake)."""

    login: Login
    kind: str

    @property
    def broker_message(self) -> str:
        """What SaslAuthenticate says, for a ``sasl`` refusal."""
        if self.login.mechanism == "PLAIN":
            return PLAIN_REFUSED
        return SCRAM_REFUSED.format(mechanism=self.login.mechanism)


REFUSED_LOGINS = {
    "wrong-password-plain": Refusal(sasl("SASL_PLAINTEXT", "PLAIN", PLAIN_USER, "wrong"), "sasl"),
    "wrong-password-scram": Refusal(sasl("SASL_SSL", "SCRAM-SHA-256", SCRAM_USER, "wrong"), "sasl"),
    "unknown-user-plain": Refusal(sasl("SASL_SSL", "PLAIN", "nobody", "secret"), "sasl"),
    "unknown-user-scram": Refusal(
        sasl("SASL_PLAINTEXT", "SCRAM-SHA-512", "nobody", "secret"), "sasl"
    ),
    "wrong-ca": Refusal(Login("SSL", trusts_other_ca=True), "untrusted-server"),
    "missing-client-certificate": Refusal(Login("MTLS"), "no-client-certificate"),
}


def trusted_ca(certificates: Certificates, login: Login) -> str:
    return certificates.other_ca if login.trusts_other_ca else certificates.ca


def client_certificate(certificates: Certificates, login: Login) -> ClientCertificate | None:
    if login.identity is None:
        return None
    return certificates.client if login.identity == "client" else certificates.stranger


def python_client_settings(broker: SecureBroker, login: Login) -> dict[str, Any]:
    """kafka-python's connection settings for ``login`` (aiokafka's but for TLS, which it
    takes as an ``ssl_context``)."""
    settings: dict[str, Any] = {
        "bootstrap_servers": broker.address(login.listener),
        "security_protocol": login.security_protocol,
    }
    if login.mechanism is not None:
        settings["sasl_mechanism"] = login.mechanism
        settings["sasl_plain_username"] = login.user
        settings["sasl_plain_password"] = login.password
    if "SSL" in login.security_protocol:
        settings["ssl_cafile"] = trusted_ca(broker.certificates, login)
        certificate = client_certificate(broker.certificates, login)
        if certificate is not None:
            settings["ssl_certfile"] = certificate.certificate
            settings["ssl_keyfile"] = certificate.key
    return settings


def librdkafka_settings(broker: SecureBroker, login: Login) -> dict[str, str]:
    """librdkafka's connection settings for ``login``: confluent-kafka's config, and
    kcat's ``-X`` options."""
    settings = {
        "bootstrap.servers": broker.address(login.listener),
        "security.protocol": login.security_protocol.lower(),
    }
    if login.mechanism is not None:
        settings["sasl.mechanism"] = login.mechanism
        settings["sasl.username"] = login.user
        settings["sasl.password"] = login.password
    if "SSL" in login.security_protocol:
        settings["ssl.ca.location"] = trusted_ca(broker.certificates, login)
        certificate = client_certificate(broker.certificates, login)
        if certificate is not None:
            settings["ssl.certificate.location"] = certificate.certificate
            settings["ssl.key.location"] = certificate.key
    return settings


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@contextlib.contextmanager
def logged(name: str, level: int = logging.WARNING) -> Iterator[list[str]]:
    """The lines logger ``name`` (and its children) logs at ``level`` or above meanwhile."""
    lines: list[str] = []
    handler = _Lines(lines)
    logger = logging.getLogger(name)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
