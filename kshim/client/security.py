"""A Kafka client's security settings: the properties a Java client or librdkafka takes, read
into what kshim's own client needs to connect (``wire``), so that kshim's tools take
the same client properties file as Kafka's (``--command-config``).

The Java client's names (``CommonClientConfigs``, ``SaslConfigs``, ``SslConfigs``)::

    security.protocol                      PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism                         PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    sasl.jaas.config                       org.apache.kafka.common.security.plain.PlainLoginModule
                                           (or ...scram.ScramLoginModule) required
                                           username="alice" password="alice-secret";
    ssl.truststore.location                the CAs to trust, a PEM file (default: the system's)
    ssl.truststore.certificates            or the same PEM inline
    ssl.truststore.type, ssl.keystore.type PEM only (KIP-651); JKS and PKCS12 are refused
    ssl.keystore.location                  a client certificate: a PEM file with the private key
                                           and its certificate chain
    ssl.keystore.key                       or the key and the chain inline
      + ssl.keystore.certificate.chain
    ssl.key.password                       the password of an encrypted key
    ssl.endpoint.identification.algorithm  https (default): the broker's certificate must name
                                           the host connected to; empty: it need not

librdkafka's names where they differ: ``sasl.mechanisms``, ``sasl.username`` and
``sasl.password`` (instead of sasl.jaas.config), ``ssl.ca.location`` / ``ssl.ca.pem``,
``ssl.certificate.location`` + ``ssl.key.location`` / ``ssl.certificate.pem`` +
``ssl.key.pem``, and ``none`` for no hostname check. ``client.id`` is accepted and not
used. Any other setting, or a TLS or SASL setting the protocol does not use, is refused:
a setting silently ignored could be one the user relies on. Errors name settings, never
their values, which may be secrets.

A setting given empty counts as not given (as kshim's broker defaults do), except
ssl.endpoint.identification.algorithm, for which empty means no hostname check. Values
are trimmed, as Kafka's ConfigDef trims them.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from kshim.client.jaas import (
    CONTROL_FLAGS,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasControlFlagError,
    JaasError,
    JaasTokenError,
    LoginModule,
    parse_jaas_config,
)
from kshim.client.tls import Pem, TlsSettings, TlsSettingsError

SECURITY_PROTOCOL = "security.protocol"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
JAAS_EXAMPLE = 'LoginModule required username="..." password="...";'
ENDPOINT_CHECK = "ssl.endpoint.identification.algorithm"
# Each setting by its names: the Java client's first, then librdkafka's.
MECHANISM = ("sasl.mechanism", "sasl.mechanisms")
JAAS = ("sasl.jaas.config",)
USERNAME, PASSWORD = ("sasl.username",), ("sasl.password",)
TRUST_FILE = ("ssl.truststore.location", "ssl.ca.location")
TRUST_TEXT = ("ssl.truststore.certificates", "ssl.ca.pem")
KEYSTORE_FILE = ("ssl.keystore.location",)
CHAIN_TEXT = ("ssl.keystore.certificate.chain", "ssl.certificate.pem")
KEY_TEXT = ("ssl.keystore.key", "ssl.key.pem")
CHAIN_FILE, KEY_FILE = ("ssl.certificate.location",), ("ssl.key.location",)
KEY_PASSWORD = ("ssl.key.password",)
STORE_TYPES = ("ssl.truststore.type", "ssl.keystore.type")
# Kafka refuses a store password with PEM stores (DefaultSslEngineFactory): only the key
# has one, ssl.key.password.
STORE_PASSWORDS = ("ssl.truststore.password", "ssl.keystore.password")
SASL_KEYS = frozenset(MECHANISM + JAAS + USERNAME + PASSWORD)
TLS_KEYS = frozenset(
    TRUST_FILE + TRUST_TEXT + KEYSTORE_FILE + CHAIN_TEXT + KEY_TEXT + CHAIN_FILE + KEY_FILE
) | frozenset(KEY_PASSWORD + STORE_TYPES + STORE_PASSWORDS + (ENDPOINT_CHECK,))
# Accepted so that a Kafka tool's properties file works unchanged; kshim's tools keep their
# own client id.
IGNORED_KEYS = frozenset({"client.id"})
KNOWN_KEYS = SASL_KEYS | TLS_KEYS | IGNORED_KEYS | {SECURITY_PROTOCOL}


class ClientSecurityError(ValueError):
    """Client security settings that cannot be used; the message names the settings, never
    a value that could be a secret."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How to connect: TLS (``tls`` set) and SASL (``mechanism`` set) as the protocol says."""

    protocol: str  # one of SECURITY_PROTOCOLS
    tls: TlsSettings | None = None
    mechanism: str | None = None  # one of SASL_MECHANISMS
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.tls is not None

    @property
    def uses_sasl(self) -> bool:
        return self.mechanism is not None

    def ssl_context(self) -> ssl.SSLContext | None:
        """A new client TLS context, or None for a protocol without TLS; raises
        ClientSecurityError when a file cannot be read or holds no usable PEM."""
        if self.tls is None:
            return None
        try:
            return self.tls.context()
        except TlsSettingsError as error:
            raise ClientSecurityError(str(error)) from error


PLAINTEXT = ClientSecurity("PLAINTEXT")


def client_security(properties: Mapping[str, str]) -> ClientSecurity:
    """The security that Kafka client ``properties`` ask for; raises ClientSecurityError for
    a setting that is unknown, unsupported, contradicted or missing."""
    unknown = sorted(set(properties) - KNOWN_KEYS)
    if unknown:
        raise ClientSecurityError(
            f"not supported: {', '.join(unknown)} (kshim's client takes security.protocol, "
            "sasl.* and ssl.* settings and client.id)"
        )
    given = {
        key: value.strip()
        for key, value in properties.items()
        if value.strip() or key == ENDPOINT_CHECK
    }
    protocol = _protocol(given)
    uses_tls, uses_sasl = protocol.endswith("SSL"), protocol.startswith("SASL_")
    _refuse_unused(given, TLS_KEYS, uses_tls, protocol, "SSL or SASL_SSL")
    _refuse_unused(given, SASL_KEYS, uses_sasl, protocol, "SASL_PLAINTEXT or SASL_SSL")
    tls = _tls(given) if uses_tls else None
    if not uses_sasl:
        return ClientSecurity(protocol, tls)
    mechanism = _mechanism(given, protocol)
    username, password = _credentials(given, mechanism)
    return ClientSecurity(protocol, tls, mechanism, username, password)


def _protocol(given: Mapping[str, str]) -> str:
    # Kafka reads the protocol name case-insensitively (SecurityProtocol.forName).
    protocol = given.get(SECURITY_PROTOCOL, "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ClientSecurityError(
            f"security.protocol={protocol} is not one of {', '.join(SECURITY_PROTOCOLS)}"
        )
    return protocol


def _refuse_unused(
    given: Mapping[str, str], keys: frozenset[str], used: bool, protocol: str, needed: str
) -> None:
    # ssl.endpoint.identification.algorithm alone is let pass: a properties file shared by
    # several clients often sets it whatever the protocol, and it asks for nothing.
    unused = sorted(key for key in given if key in keys and key != ENDPOINT_CHECK)
    if unused and not used:
        raise ClientSecurityError(
            f"security.protocol={protocol} does not use {', '.join(unused)} "
            f"(security.protocol={needed} does)"
        )


def _one(given: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """(name, value) of the one of ``names`` given, None for none; raises
    ClientSecurityError when two names of the same setting are both given."""
    found = [(name, given[name]) for name in _given(given, names)]
    if len(found) > 1:
        raise ClientSecurityError(f"{' and '.join(name for name, _ in found)} name one setting")
    return found[0] if found else None


def _given(given: Mapping[str, str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in given]


def _exclusive(given: Mapping[str, str], *groups: tuple[str, ...]) -> None:
    """Raises ClientSecurityError when settings of more than one of ``groups`` are given."""
    present = [given_names[0] for group in groups if (given_names := _given(given, group))]
    if len(present) > 1:
        raise ClientSecurityError(f"{' and '.join(present)} are alternatives: give one")


def _tls(given: Mapping[str, str]) -> TlsSettings:
    for name in STORE_TYPES:
        store_type = given.get(name, "PEM").upper()
        if store_type != "PEM":
            raise ClientSecurityError(
                f"{name}={store_type} is not supported: kshim's client reads PEM stores only "
                "(export a JKS or PKCS12 store's certificates and key to PEM with keytool "
                "-exportcert -rfc, or openssl pkcs12 -nodes)"
            )
    for name in STORE_PASSWORDS:
        if name in given:
            raise ClientSecurityError(
                f"{name} is not used with PEM stores: an encrypted key's password is "
                "ssl.key.password"
            )
    trusted = _pem(given, TRUST_FILE, TRUST_TEXT)
    chain, key = _identity(given)
    if chain is None and KEY_PASSWORD[0] in given:
        raise ClientSecurityError("ssl.key.password is given without a key")
    return TlsSettings(
        trusted=trusted,
        chain=chain,
        key=key,
        key_password=given.get(KEY_PASSWORD[0]),
        check_hostname=_check_hostname(given),
    )


def _pem(
    given: Mapping[str, str], file_names: tuple[str, ...], text_names: tuple[str, ...]
) -> Pem | None:
    _exclusive(given, file_names, text_names)
    in_file = _one(given, file_names)
    if in_file is not None:
        return Pem(in_file[0], path=in_file[1])
    inline = _one(given, text_names)
    return None if inline is None else Pem(inline[0], text=inline[1])


def _identity(given: Mapping[str, str]) -> tuple[Pem | None, Pem | None]:
    """The client certificate chain and its key: one keystore file holding both, or each
    inline, or each in a file of its own (librdkafka)."""
    _exclusive(given, KEYSTORE_FILE, CHAIN_TEXT + KEY_TEXT, CHAIN_FILE + KEY_FILE)
    keystore = _one(given, KEYSTORE_FILE)
    if keystore is not None:
        both = Pem(keystore[0], path=keystore[1])
        return both, both
    chain = _pem(given, CHAIN_FILE, CHAIN_TEXT)
    key = _pem(given, KEY_FILE, KEY_TEXT)
    if (chain is None) != (key is None):
        named, missing = (chain, "key") if key is None else (key, "certificate chain")
        assert named is not None
        raise ClientSecurityError(f"{named.setting} is given without the {missing}")
    return chain, key


def _check_hostname(given: Mapping[str, str]) -> bool:
    algorithm = given.get(ENDPOINT_CHECK, "https").lower()
    if algorithm not in ("https", "", "none"):
        raise ClientSecurityError(
            f"{ENDPOINT_CHECK}={algorithm} is not supported: https (check the broker's "
            "host name), or empty for no check"
        )
    return algorithm == "https"


def _mechanism(given: Mapping[str, str], protocol: str) -> str:
    named = _one(given, MECHANISM)
    if named is None:
        raise ClientSecurityError(
            f"security.protocol={protocol} needs sasl.mechanism: {', '.join(SASL_MECHANISMS)} "
            "(Kafka's default, GSSAPI, is not supported)"
        )
    key, value = named
    if value.upper() not in SASL_MECHANISMS:
        raise ClientSecurityError(
            f"{key}={value} is not supported: {', '.join(SASL_MECHANISMS)} are"
        )
    return value.upper()


def _credentials(given: Mapping[str, str], mechanism: str) -> tuple[str, str]:
    """The user name and password, from sasl.jaas.config or sasl.username and
    sasl.password."""
    _exclusive(given, JAAS, USERNAME + PASSWORD)
    if JAAS[0] in given:
        return jaas_credentials(given[JAAS[0]], mechanism)
    username, password = given.get(USERNAME[0]), given.get(PASSWORD[0])
    if username is None or password is None:
        raise ClientSecurityError(
            f"sasl.mechanism={mechanism} needs sasl.jaas.config ({JAAS_EXAMPLE}), or "
            "sasl.username and sasl.password"
        )
    return username, password


def jaas_credentials(text: str, mechanism: str) -> tuple[str, str]:
    """(username, password) of a client's ``sasl.jaas.config``: one login module, Kafka's
    for ``mechanism``, with those two options and no other; raises ClientSecurityError."""
    module = _login_module(text)
    expected = SCRAM_LOGIN_MODULE if mechanism.startswith("SCRAM-") else PLAIN_LOGIN_MODULE
    if module.name != expected:
        raise ClientSecurityError(
            f"sasl.jaas.config names {module.name}; sasl.mechanism={mechanism} takes {expected}"
        )
    options = module.options
    others = sorted(set(options) - {"username", "password"})
    if others:
        raise ClientSecurityError(f"sasl.jaas.config options not supported: {', '.join(others)}")
    if "username" not in options or "password" not in options:
        raise ClientSecurityError(f"sasl.jaas.config needs username and password: {JAAS_EXAMPLE}")
    return options["username"], options["password"]


def _login_module(text: str) -> LoginModule:
    """The one login module of ``text``, read as the broker reads its own; raises
    ClientSecurityError saying where the text goes wrong, never a value from it."""
    try:
        return parse_jaas_config(text)
    except JaasTokenError as error:
        raise ClientSecurityError(
            f"sasl.jaas.config: unexpected character at {error.position} "
            "(a value holding it must be quoted)"
        ) from None
    except JaasControlFlagError:
        raise ClientSecurityError(
            f"sasl.jaas.config's control flag is not one of {', '.join(CONTROL_FLAGS)}"
        ) from None
    except JaasError:
        raise ClientSecurityError(
            f"sasl.jaas.config is not one login module: {JAAS_EXAMPLE}"
        ) from None
