"""kshim's blocking client (``kshim.client.wire``) over TLS and SASL, against a scripted peer:
the TLS handshake with trustme's certificates (the broker's name checked or not, a client
certificate), and the SASL exchange that comes before any other request (SaslHandshake v1,
then SaslAuthenticate v2: PLAIN once, SCRAM twice), with the broker's refusals said."""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import trustme
from scramp import ScramMechanism

from kshim.client.sasl import AuthenticationFailed
from kshim.client.security import ClientSecurity, client_security
from kshim.client.wire import connect
from kshim.protocol.errors import ErrorCode
from tests.scripted_broker import Script, ScriptedBroker

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
ENABLED = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PASSWORD = "alice-secret"
REFUSED = "Authentication failed: Invalid username or password"


def api_versions(_: Any) -> Mapping[str, Any]:
    return {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}


def handshake(_: Any) -> Mapping[str, Any]:
    return {"error_code": 0, "mechanisms": ENABLED}


def plain_authenticate(request: Any) -> Mapping[str, Any]:
    if request.auth_bytes == b"\0alice\0" + PASSWORD.encode():
        return {"error_code": 0, "auth_bytes": b"", "session_lifetime": 0}
    return {"error_code": ErrorCode.sasl_authentication_failed, "error_message": REFUSED}


def scram_authenticate(mechanism: str, forged_signature: bool = False) -> Script:
    """A SCRAM server for alice (scramp's), one SaslAuthenticate answer per step."""
    scram = ScramMechanism(mechanism)
    salt, stored_key, server_key, iterations = scram.make_auth_info(PASSWORD, 4096)
    server = scram.make_server(lambda _: (salt, stored_key, server_key, iterations))

    def answer(request: Any) -> Mapping[str, Any]:
        message = request.auth_bytes.decode()
        if message.startswith("n,"):
            server.set_client_first(message)
            return {"error_code": 0, "auth_bytes": server.get_server_first().encode()}
        try:
            server.set_client_final(message)
        except Exception:  # scramp's ScramException: the proof does not verify
            return {"error_code": ErrorCode.sasl_authentication_failed, "error_message": REFUSED}
        final = "v=Zm9yZ2Vk" if forged_signature else server.get_server_final()
        return {"error_code": 0, "auth_bytes": final.encode()}

    return answer


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_broker(ca: trustme.CA) -> Iterator[ScriptedBroker]:
    """A TLS peer whose certificate names 127.0.0.1 only, not localhost."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    broker = ScriptedBroker({API_VERSIONS: api_versions}, tls=context).start()
    yield broker
    broker.stop()


def security(**properties: str) -> ClientSecurity:
    return client_security(properties)


def ssl_security(ca: trustme.CA, tmp_path: Any, **properties: str) -> ClientSecurity:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    return security(
        **{"security.protocol": "SSL", "ssl.truststore.location": str(tmp_path / "ca.pem")},
        **properties,
    )


def test_tls_with_the_brokers_name_checked(
    tls_broker: ScriptedBroker, ca: trustme.CA, tmp_path: Any
) -> None:
    secured = ssl_security(ca, tmp_path)
    with connect(tls_broker.bootstrap, 5.0, security=secured) as connection:
        assert connection.call(API_VERSIONS, 3).error_code == 0
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        connect(f"localhost:{tls_broker.port}", 5.0, security=secured)
    unchecked = ssl_security(ca, tmp_path, **{"ssl.endpoint.identification.algorithm": ""})
    with connect(f"localhost:{tls_broker.port}", 5.0, security=unchecked) as connection:
        assert connection.call(API_VERSIONS, 3).error_code == 0


def test_tls_refuses_a_broker_of_another_ca(tls_broker: ScriptedBroker, tmp_path: Any) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        connect(tls_broker.bootstrap, 5.0, security=ssl_security(trustme.CA(), tmp_path))


def test_tls_with_a_client_certificate(ca: trustme.CA, tmp_path: Any) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED  # ssl.client.auth=required
    broker = ScriptedBroker({API_VERSIONS: api_versions}, tls=context).start()
    try:
        ca.issue_cert("alice@example.com").private_key_and_cert_chain_pem.write_to_path(
            str(tmp_path / "alice.pem")
        )
        with_certificate = ssl_security(
            ca, tmp_path, **{"ssl.keystore.location": str(tmp_path / "alice.pem")}
        )
        with connect(broker.bootstrap, 5.0, security=with_certificate) as connection:
            assert connection.call(API_VERSIONS, 3).error_code == 0
        # TLS 1.3 says the refusal after the handshake: at the first read at the latest.
        without_certificate = ssl_security(ca, tmp_path)
        with (
            pytest.raises(OSError),
            connect(broker.bootstrap, 5.0, security=without_certificate) as connection,
        ):
            connection.call(API_VERSIONS, 3)
    finally:
        broker.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_authenticates_before_any_other_request(mechanism: str) -> None:
    authenticate = plain_authenticate if mechanism == "PLAIN" else scram_authenticate(mechanism)
    scripts = {
        API_VERSIONS: api_versions,
        SASL_HANDSHAKE: handshake,
        SASL_AUTHENTICATE: authenticate,
    }
    broker = ScriptedBroker(scripts).start()
    try:
        secured = security(
            **{
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": "alice",
                "sasl.password": PASSWORD,
            }
        )
        with connect(broker.bootstrap, 5.0, security=secured) as connection:
            connection.call(API_VERSIONS, 3)
    finally:
        broker.stop()
    steps = 1 if mechanism == "PLAIN" else 2
    assert [(key, version) for key, version, _ in broker.requests] == [
        (SASL_HANDSHAKE, 1),
        *[(SASL_AUTHENTICATE, 2)] * steps,
        (API_VERSIONS, 3),
    ]
    assert broker.requests_of(SASL_HANDSHAKE)[0].mechanism == mechanism


@pytest.mark.parametrize(
    ("mechanism", "scripts", "error"),
    [
        (
            "PLAIN",
            {SASL_AUTHENTICATE: plain_authenticate},
            f"PLAIN authentication as alice: SASL_AUTHENTICATION_FAILED: {REFUSED}",
        ),
        (
            "SCRAM-SHA-256",
            {SASL_AUTHENTICATE: scram_authenticate("SCRAM-SHA-256")},
            f"SCRAM-SHA-256 authentication as alice: SASL_AUTHENTICATION_FAILED: {REFUSED}",
        ),
        (
            "SCRAM-SHA-512",
            {
                SASL_HANDSHAKE: lambda _: {
                    "error_code": ErrorCode.unsupported_sasl_mechanism,
                    "mechanisms": ["PLAIN"],
                }
            },
            "SaslHandshake for SCRAM-SHA-512: UNSUPPORTED_SASL_MECHANISM (the listener "
            "enables SASL mechanisms: PLAIN)",
        ),
    ],
)
def test_a_refusal_says_the_brokers_error(
    mechanism: str, scripts: dict[int, Script], error: str
) -> None:
    broker = ScriptedBroker({SASL_HANDSHAKE: handshake, **scripts}).start()
    try:
        wrong = security(
            **{
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": "alice",
                "sasl.password": "not-" + PASSWORD,
            }
        )
        with pytest.raises(AuthenticationFailed) as raised:
            connect(broker.bootstrap, 5.0, security=wrong)
    finally:
        broker.stop()
    assert str(raised.value) == error


def test_a_scram_broker_that_does_not_know_the_password_is_refused() -> None:
    """The server-final signature proves the broker holds the password's keys; one that
    does not match fails though the broker answered no error."""
    forged = scram_authenticate("SCRAM-SHA-256", forged_signature=True)
    broker = ScriptedBroker({SASL_HANDSHAKE: handshake, SASL_AUTHENTICATE: forged}).start()
    try:
        secured = security(
            **{
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": PASSWORD,
            }
        )
        with pytest.raises(AuthenticationFailed, match="SCRAM-SHA-256 answer does not verify"):
            connect(broker.bootstrap, 5.0, security=secured)
    finally:
        broker.stop()


def test_without_security_nothing_but_the_request_is_sent() -> None:
    broker = ScriptedBroker({API_VERSIONS: api_versions}).start()
    try:
        for secured in (None, security()):
            with connect(broker.bootstrap, 5.0, security=secured) as connection:
                connection.call(API_VERSIONS, 3)
    finally:
        broker.stop()
    assert [key for key, _, _ in broker.requests] == [API_VERSIONS, API_VERSIONS]
