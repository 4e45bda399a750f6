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

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kshim.testing import START_TIMEOUT_S, BrokerProcess, free_port, wait_for_port

ADMIN_TIMEOUT_S = 20.0
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
    }


class SecureBroker(BrokerProcess):
    """A ``kshim serve`` child with every listener of LISTENERS on a port of its own;
    ``port`` and ``bootstrap`` are its PLAINTEXT listener's."""

    def __init__(self, data_dir: Path, certificates: Certificates) -> None:
        self.ports = {name: free_port() for name in LISTENERS}
        self.certificates = certificates
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

    def admin(self) -> AdminClient:
        """A librdkafka admin client on the PLAINTEXT listener."""
        return AdminClient({"bootstrap.servers": self.bootstrap})

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
