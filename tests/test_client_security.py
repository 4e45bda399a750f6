"""Kafka client properties read into kshim's ClientSecurity (``kshim.client.security``), and
the TLS contexts built from them (``kshim.client.tls``) with trustme's certificates: what is
accepted under the Java client's and librdkafka's names, and the one clear error for what is
not, which never repeats a secret."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from kshim.client.java_properties import load_client_properties, parse_java_properties
from kshim.client.security import (
    PLAINTEXT,
    ClientSecurity,
    ClientSecurityError,
    client_security,
    jaas_credentials,
)
from kshim.client.tls import Pem, TlsSettings

SECRET = "s3cret-value"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="alice" password="{SECRET}";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="bob" password="{SECRET}";'
)


def security_error(properties: dict[str, str]) -> str:
    with pytest.raises(ClientSecurityError) as raised:
        client_security(properties).ssl_context()
    message = str(raised.value)
    assert SECRET not in message
    return message


def test_no_settings_is_plaintext_and_a_client_id_is_accepted() -> None:
    assert client_security({}) == PLAINTEXT
    assert client_security({"client.id": "ops", "security.protocol": "plaintext"}) == PLAINTEXT
    assert PLAINTEXT.ssl_context() is None


def test_java_client_names_for_sasl_ssl_with_plain() -> None:
    security = client_security(
        {
            "security.protocol": "sasl_ssl",  # Kafka reads it case-insensitively
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/kafka/ca.pem",
        }
    )
    assert (security.protocol, security.mechanism) == ("SASL_SSL", "PLAIN")
    assert (security.username, security.password) == ("alice", SECRET)
    assert security.tls == TlsSettings(trusted=Pem("ssl.truststore.location", "/etc/kafka/ca.pem"))
    assert security.uses_tls and security.uses_sasl
    assert SECRET not in repr(security)


def test_librdkafka_names_for_sasl_plaintext_with_scram() -> None:
    security = client_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "bob",
            "sasl.password": SECRET,
        }
    )
    assert security == ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "bob", SECRET)
    assert security.ssl_context() is None


@pytest.mark.parametrize(
    ("value", "check"), [("https", True), ("HTTPS", True), ("", False), ("none", False)]
)
def test_the_hostname_check_follows_endpoint_identification(value: str, check: bool) -> None:
    properties = {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": value}
    tls = client_security(properties).tls
    assert tls is not None and tls.check_hostname is check
    assert client_security({"security.protocol": "SSL"}).tls == TlsSettings(check_hostname=True)


def test_every_way_of_giving_the_client_certificate() -> None:
    keystore = client_security({"security.protocol": "SSL", "ssl.keystore.location": "/k.pem"})
    inline = client_security(
        {"security.protocol": "SSL", "ssl.keystore.key": "K", "ssl.keystore.certificate.chain": "C"}
    )
    files = client_security(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": SECRET,
        }
    )
    assert keystore.tls is not None and keystore.tls.chain == keystore.tls.key
    assert inline.tls is not None and inline.tls.key == Pem("ssl.keystore.key", text="K")
    assert files.tls is not None and files.tls.chain == Pem("ssl.certificate.location", "/c.pem")
    assert files.tls.key_password == SECRET and SECRET not in repr(files)


@pytest.mark.parametrize(
    ("jaas", "credentials"),
    [
        (SCRAM_JAAS, ("bob", SECRET)),
        # Java's StreamTokenizer: either quote, backslash escapes, comments, bare words.
        (
            "org.apache.kafka.common.security.scram.ScramLoginModule /* the client */ REQUIRED\n"
            "  username=bob // a comment\n  password='a \\'quoted\\' \\\"pass\\\\word\\101';",
            ("bob", "a 'quoted' \"pass\\wordA"),
        ),
    ],
)
def test_jaas_credentials_are_read_as_kafka_tokenises_them(
    jaas: str, credentials: tuple[str, str]
) -> None:
    assert jaas_credentials(jaas, "SCRAM-SHA-256") == credentials


@pytest.mark.parametrize(
    ("properties", "error"),
    [
        (
            {"bootstrap.servers": "b:9092", "sasl.kerberos.service.name": "kafka"},
            "not supported: bootstrap.servers, sasl.kerberos.service.name (kshim's client "
            "takes security.protocol, sasl.* and ssl.* settings and client.id)",
        ),
        (
            {"security.protocol": "TLS"},
            "security.protocol=TLS is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        ),
        (
            {"ssl.keystore.location": "/k.pem", "ssl.key.password": SECRET},
            "security.protocol=PLAINTEXT does not use ssl.key.password, ssl.keystore.location "
            "(security.protocol=SSL or SASL_SSL does)",
        ),
        (
            {"security.protocol": "SSL", "sasl.mechanism": "PLAIN", "sasl.password": SECRET},
            "security.protocol=SSL does not use sasl.mechanism, sasl.password "
            "(security.protocol=SASL_PLAINTEXT or SASL_SSL does)",
        ),
        (
            {"security.protocol": "SASL_SSL"},
            "security.protocol=SASL_SSL needs sasl.mechanism: PLAIN, SCRAM-SHA-256, "
            "SCRAM-SHA-512 (Kafka's default, GSSAPI, is not supported)",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"},
            "sasl.mechanism=GSSAPI is not supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.mechanisms": "PLAIN",
            },
            "sasl.mechanism and sasl.mechanisms name one setting",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a"},
            'sasl.mechanism=PLAIN needs sasl.jaas.config (LoginModule required username="..." '
            'password="...";), or sasl.username and sasl.password',
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": PLAIN_JAAS,
                "sasl.password": SECRET,
            },
            "sasl.jaas.config and sasl.password are alternatives: give one",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.type": "JKS"},
            "ssl.truststore.type=JKS is not supported: kshim's client reads PEM stores only "
            "(export a JKS or PKCS12 store's certificates and key to PEM with keytool "
            "-exportcert -rfc, or openssl pkcs12 -nodes)",
        ),
        (
            {"security.protocol": "SSL", "ssl.keystore.password": SECRET},
            "ssl.keystore.password is not used with PEM stores: an encrypted key's password is "
            "ssl.key.password",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": "/a", "ssl.truststore.location": "/b"},
            "ssl.truststore.location and ssl.ca.location name one setting",
        ),
        (
            {"security.protocol": "SSL", "ssl.keystore.location": "/k", "ssl.keystore.key": "K"},
            "ssl.keystore.location and ssl.keystore.key are alternatives: give one",
        ),
        (
            {"security.protocol": "SSL", "ssl.keystore.key": "K"},
            "ssl.keystore.key is given without the certificate chain",
        ),
        (
            {"security.protocol": "SSL", "ssl.key.password": SECRET},
            "ssl.key.password is given without a key",
        ),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
            "ssl.endpoint.identification.algorithm=ldap is not supported: https (check the "
            "broker's host name), or empty for no check",
        ),
    ],
)
def test_settings_that_cannot_be_used_are_one_error(properties: dict[str, str], error: str) -> None:
    assert security_error(properties) == error


@pytest.mark.parametrize(
    ("mechanism", "jaas", "error"),
    [
        ("PLAIN", SECRET, 'sasl.jaas.config is not one login module: LoginModule required '
         'username="..." password="...";'),
        ("PLAIN", PLAIN_JAAS + PLAIN_JAAS, 'sasl.jaas.config is not one login module: '
         'LoginModule required username="..." password="...";'),
        ("PLAIN", PLAIN_JAAS.replace(";", ""), 'sasl.jaas.config is not one login module: '
         'LoginModule required username="..." password="...";'),
        ("SCRAM-SHA-256", PLAIN_JAAS, "sasl.jaas.config names org.apache.kafka.common.security."
         "plain.PlainLoginModule; sasl.mechanism=SCRAM-SHA-256 takes org.apache.kafka.common."
         "security.scram.ScramLoginModule"),
        ("PLAIN", PLAIN_JAAS.replace("required", "always"), "sasl.jaas.config's control flag "
         "is not one of required, requisite, sufficient, optional"),
        ("PLAIN", PLAIN_JAAS.replace(";", ' tokenauth="true";'),
         "sasl.jaas.config options not supported: tokenauth"),
        ("PLAIN", PLAIN_JAAS.replace(f' password="{SECRET}"', ""),
         'sasl.jaas.config needs username and password: LoginModule required username="..." '
         'password="...";'),
        ("PLAIN", PLAIN_JAAS.replace(f'"{SECRET}"', f"{SECRET}!"),
         "sasl.jaas.config: unexpected character at 104 (a value holding it must be quoted)"),
    ],
)  # fmt: skip
def test_a_jaas_config_that_cannot_be_used_is_said_without_its_password(
    mechanism: str, jaas: str, error: str
) -> None:
    properties = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas,
    }
    assert security_error(properties) == error


def test_java_properties_are_read_as_java_reads_them() -> None:
    text = (
        "# a comment\r\n"
        "! another\n"
        "\n"
        "   security.protocol = SSL\n"
        "client.id:ops\n"
        "sasl.mechanism PLAIN\n"
        "key\\=with\\:marks=v\\u00e9\\tx\n"
        "ssl.truststore.certificates=-----BEGIN CERTIFICATE----- \\\n"
        "    QUJD \\\n"
        "    -----END CERTIFICATE-----\n"
        "ends.in.backslash=a\\\\\n"
        "client.id=last wins\n"
        "empty=\n"
    )
    assert parse_java_properties(text) == {
        "security.protocol": "SSL",
        "client.id": "last wins",
        "sasl.mechanism": "PLAIN",
        "key=with:marks": "v\u00e9\tx",
        "ssl.truststore.certificates": "-----BEGIN CERTIFICATE----- QUJD -----END CERTIFICATE-----",
        "ends.in.backslash": "a\\",
        "empty": "",
    }


def test_a_properties_file_is_read_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("sasl.password=p\u00e4ss\n", encoding="utf-8")
    assert load_client_properties(str(path)) == {"sasl.password": "p\u00e4ss"}


# TLS contexts from trustme's certificates.


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def client_cert(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("alice@example.com")


def encrypted_key(cert: trustme.LeafCert, password: bytes) -> bytes:
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )


def chain_pem(cert: trustme.LeafCert) -> bytes:
    return b"".join(blob.bytes() for blob in cert.cert_chain_pems)


def tls_context(properties: dict[str, str]) -> ssl.SSLContext:
    context = client_security({"security.protocol": "SSL", **properties}).ssl_context()
    assert context is not None
    return context


def test_a_context_trusts_the_truststore_and_checks_names(ca: trustme.CA, tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    checked = tls_context({"ssl.truststore.location": str(tmp_path / "ca.pem")})
    unchecked = tls_context(
        {"ssl.ca.location": str(tmp_path / "ca.pem"), "ssl.endpoint.identification.algorithm": ""}
    )
    assert checked.verify_mode == unchecked.verify_mode == ssl.CERT_REQUIRED
    assert (checked.check_hostname, unchecked.check_hostname) == (True, False)
    assert checked.minimum_version == ssl.TLSVersion.TLSv1_2
    [trusted] = checked.get_ca_certs()  # only the truststore's, not the system's
    assert trusted["subject"] == trusted["issuer"]


def test_a_keystore_file_with_key_and_chain_is_loaded(
    client_cert: trustme.LeafCert, tmp_path: Path
) -> None:
    client_cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "client.pem"))
    tls_context({"ssl.keystore.location": str(tmp_path / "client.pem")})


def test_an_encrypted_key_opens_with_its_password_only(
    client_cert: trustme.LeafCert, tmp_path: Path
) -> None:
    keystore = tmp_path / "client.pem"
    keystore.write_bytes(encrypted_key(client_cert, SECRET.encode()) + chain_pem(client_cert))
    settings = {"ssl.keystore.location": str(keystore)}
    tls_context({**settings, "ssl.key.password": SECRET})
    assert security_error({"security.protocol": "SSL", **settings}) == (
        "the client's private key is encrypted: set ssl.key.password"
    )
    assert security_error(
        {"security.protocol": "SSL", **settings, "ssl.key.password": "not-" + SECRET}
    ) == (
        f"cannot use the client key and certificate of ssl.keystore.location {keystore}: "
        "the private key does not open with ssl.key.password"
    )


def test_inline_pem_joined_onto_one_line_is_loaded(
    ca: trustme.CA, client_cert: trustme.LeafCert
) -> None:
    # A value continued over lines with backslashes arrives with spaces for line breaks.
    def one_line(pem: bytes) -> str:
        return pem.decode().replace("\n", " ")

    tls_context(
        {
            "ssl.truststore.certificates": one_line(ca.cert_pem.bytes()),
            "ssl.keystore.key": one_line(encrypted_key(client_cert, b"pw")),
            "ssl.keystore.certificate.chain": one_line(chain_pem(client_cert)),
            "ssl.key.password": "pw",
        }
    )


def test_librdkafka_certificate_and_key_files_are_loaded(
    client_cert: trustme.LeafCert, tmp_path: Path
) -> None:
    client_cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    (tmp_path / "chain.pem").write_bytes(chain_pem(client_cert))
    tls_context(
        {
            "ssl.certificate.location": str(tmp_path / "chain.pem"),
            "ssl.key.location": str(tmp_path / "key.pem"),
        }
    )


def test_tls_files_that_cannot_be_used_are_one_error(
    ca: trustme.CA, client_cert: trustme.LeafCert, tmp_path: Path
) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02binary")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    other = trustme.CA().issue_cert("mallory@example.com")
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_bytes(other.private_key_pem.bytes() + chain_pem(client_cert))
    missing = tmp_path / "missing.pem"
    for properties, error in [
        (
            {"ssl.truststore.location": str(jks)},
            f"ssl.truststore.location {jks} is not PEM: kshim's client reads PEM only (export "
            "a JKS or PKCS12 store to PEM with keytool -exportcert -rfc, or openssl pkcs12 "
            "-nodes)",
        ),
        (
            {"ssl.truststore.location": str(missing)},
            f"cannot read ssl.truststore.location {missing}: No such file or directory",
        ),
        (
            {"ssl.truststore.certificates": client_cert.private_key_pem.bytes().decode()},
            "ssl.truststore.certificates holds no certificate",
        ),
        (
            {"ssl.keystore.location": str(tmp_path / "ca.pem")},
            f"ssl.keystore.location {tmp_path / 'ca.pem'} holds no private key",
        ),
        (
            {"ssl.keystore.location": str(mismatched)},
            f"cannot use the client key and certificate of ssl.keystore.location {mismatched}: "
            "key values mismatch",
        ),
    ]:
        assert security_error({"security.protocol": "SSL", **properties}) == error
