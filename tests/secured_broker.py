"""A real ``kshim serve`` with a SASL_SSL listener beside a PLAINTEXT one, for tests of clients
that connect with TLS and SASL: trustme's CA and a broker certificate for 127.0.0.1 (not
localhost), the PLAIN user alice from the listener's JAAS config, and SCRAM users made
through AlterUserScramCredentials as Kafka's admin client makes them.

The PLAINTEXT listener is for setting things up with ordinary clients. Every wait is
bounded; only the process started here is signalled.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import trustme

from kshim.client.security import ClientSecurity, client_security
from kshim.client.wire import connect
from kshim.testing import START_TIMEOUT_S, failure_lines, free_port, stop_process, wait_for_port

ALICE_PASSWORD = "alice-secret"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'user_alice="{ALICE_PASSWORD}";'
)
ALTER_USER_SCRAM_CREDENTIALS = (51, 0)
SCRAM_MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
SCRAM_ITERATIONS = 4096  # Kafka's minimum


@dataclass
class SecuredBroker:
    plaintext: str  # host:port of the PLAINTEXT listener
    secured: str  # host:port of the SASL_SSL listener
    ca_file: Path  # the CA that signed the broker's certificate (for 127.0.0.1 only)
    log_path: Path

    def security(self, mechanism: str, user: str, password: str) -> ClientSecurity:
        """A client's security for the SASL_SSL listener, in librdkafka's names."""
        return client_security(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password,
                "ssl.ca.location": str(self.ca_file),
            }
        )

    def alice(self) -> ClientSecurity:
        return self.security("PLAIN", "alice", ALICE_PASSWORD)

    def java_properties(self, mechanism: str, user: str, password: str) -> str:
        """A Kafka Java client's properties file for the SASL_SSL listener."""
        module = (
            "scram.ScramLoginModule" if mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
        )
        return (
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.jaas.config=org.apache.kafka.common.security.{module} required \\\n"
            f'    username="{user}" password="{password}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_file}\n"
        )

    def add_scram_user(self, mechanism: str, user: str, password: str) -> None:
        """Upserts ``user``'s credential as alice, as Kafka's admin client does: the salted
        password (RFC 5802 Hi) is made by the client and sent, never the password."""
        code, hash_name = SCRAM_MECHANISMS[mechanism]
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, SCRAM_ITERATIONS)
        upsertion = {
            "name": user,
            "mechanism": code,
            "iterations": SCRAM_ITERATIONS,
            "salt": salt,
            "salted_password": salted,
        }
        with connect(self.secured, 10.0, security=self.alice()) as connection:
            answer = connection.call(
                *ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": [upsertion]}
            )
        assert [(result.user, result.error_code) for result in answer.results] == [(user, 0)]


@contextlib.contextmanager
def running_secured_broker(work: Path, settings: Sequence[str] = ()) -> Iterator[SecuredBroker]:
    """A broker in ``work`` for the duration of the block, with more ``settings``
    (KEY=VALUE); asserts after that it logged no failure."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(work / "broker.pem")
    )
    plaintext_port, secured_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plaintext_port},SASL_SSL://127.0.0.1:{secured_port}"
    all_settings = [
        f"listeners={listeners}",
        f"ssl.keystore.location={work / 'broker.pem'}",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
        "kshim.metrics.listen=",
        *settings,
    ]
    command = [sys.executable, "-m", "kshim", "serve", "--data-dir", str(work / "data")]
    for setting in all_settings:
        command += ["--set", setting]
    log_path = work / "broker.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        for port in (plaintext_port, secured_port):
            wait_for_port("127.0.0.1", port, START_TIMEOUT_S)
        yield SecuredBroker(
            f"127.0.0.1:{plaintext_port}", f"127.0.0.1:{secured_port}", work / "ca.pem", log_path
        )
    finally:
        stop_process(process)
    assert failure_lines(log_path.read_text(encoding="utf-8", errors="replace")) == []
