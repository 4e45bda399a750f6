"""The security settings, under Kafka's broker key names (``SslConfigs``,
``BrokerSecurityConfigs``, ``KafkaConfig``), so a ``server.properties`` written for Kafka
configures kshim's listeners, TLS, SASL and ACLs unchanged.

Kafka lets most of them be set for one listener only, as
``listener.name.<listener>.<key>`` (``listener.name.sasl_ssl.ssl.client.auth=required``),
and takes a listener's SASL users from
``listener.name.<listener>.<mechanism>.sasl.jaas.config``; ``listener_key`` recognises
those names.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kshim.client.jaas import JaasError, parse_jaas_config

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's StandardAuthorizer (KRaft) and AclAuthorizer (ZooKeeper) both switch kshim's
# ACL enforcement on; kshim has one authoriser, persisted with the broker's metadata.
AUTHORIZER_CLASSES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)

SECURITY_DEFAULTS: dict[str, str] = {
    "listener.security.protocol.map": (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    ),
    # Kafka names its own listener for controllers and brokers; kshim has one node and
    # accepts the keys so a Kafka server.properties starts it.
    "inter.broker.listener.name": "",
    "security.inter.broker.protocol": "PLAINTEXT",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    # Kafka's default is GSSAPI (Kerberos), which kshim does not offer: every mechanism it
    # offers is enabled unless the operator narrows them.
    "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
    "connection.failed.authentication.delay.ms": "100",
    # kshim's own: a TLS handshake not completed in this time is dropped, so that a peer
    # that connects and says nothing does not hold a connection slot for asyncio's
    # default minute (Kafka leaves it to connections.max.idle.ms, ten minutes).
    "kshim.ssl.handshake.timeout.ms": "10000",
    # kshim's own: failed SASL logins from one address spend a bucket of this many tokens,
    # refilled at this rate a second; an address with none left has its new connections to
    # SASL listeners held and closed unserved (server/security/login_throttle.py,
    # held_refusals.py). Burst 0: off.
    "kshim.failed.authentication.burst": "10",
    "kshim.failed.authentication.rate": "1",
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.keystore.key": "",
    "ssl.keystore.certificate.chain": "",
    "ssl.key.password": "",
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "ssl.truststore.certificates": "",
    "ssl.client.auth": "none",
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": "",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.endpoint.identification.algorithm": "https",
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
}


class SecurityConfigError(ValueError):
    """A security setting is malformed."""


def _choice(*allowed: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value.strip() not in allowed:
            raise SecurityConfigError(f"{value!r} is not one of {', '.join(allowed)}")
        return value.strip()

    return check


def _names(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        names = [name.strip() for name in value.split(",") if name.strip()]
        for name in names:
            if name not in allowed:
                raise SecurityConfigError(f"{name!r} is not one of {', '.join(allowed)}")
        return ",".join(names)

    return check


def _protocol_map(value: str) -> str:
    for entry in (part.strip() for part in value.split(",") if part.strip()):
        name, separator, protocol = entry.partition(":")
        if not separator or not name.strip() or protocol.strip() not in SECURITY_PROTOCOLS:
            raise SecurityConfigError(
                f"{entry!r} is not NAME:PROTOCOL, PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
            )
    return value.strip()


def _tls_versions(value: str) -> str:
    versions = [name.strip() for name in value.split(",") if name.strip()]
    if not versions:
        raise SecurityConfigError("no TLS version enabled")
    for version in versions:
        # TLS 1.0 and 1.1 are deprecated (RFC 8996): a listener never offers them.
        if version not in ("TLSv1.2", "TLSv1.3"):
            raise SecurityConfigError(f"{version!r}: only TLSv1.2 and TLSv1.3 are offered")
    return ",".join(versions)


def _integer(minimum: int, maximum: int) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            number = int(value.strip())
        except ValueError:
            raise SecurityConfigError(f"{value!r} is not an integer") from None
        if not minimum <= number <= maximum:
            raise SecurityConfigError(f"{number} outside [{minimum}, {maximum}]")
        return str(number)

    return check


def _authorizer(value: str) -> str:
    value = value.strip()
    if value and value not in AUTHORIZER_CLASSES:
        raise SecurityConfigError(
            f"{value!r}: kshim's authoriser is switched on by {' or '.join(AUTHORIZER_CLASSES)}"
        )
    return value


def _boolean(value: str) -> str:
    if value.strip().lower() not in ("true", "false"):
        raise SecurityConfigError(f"{value!r} is not true or false")
    return value.strip().lower()


def _any(value: str) -> str:
    return value


def _jaas(value: str) -> str:
    """A JAAS option must parse at start-up: a broker whose PLAIN users cannot be read would
    refuse every one of them."""
    try:
        parse_jaas_config(value)
    except JaasError as error:
        raise SecurityConfigError(str(error)) from None
    return value


SECURITY_VALIDATORS: dict[str, Callable[[str], str]] = {
    "listener.security.protocol.map": _protocol_map,
    "sasl.enabled.mechanisms": _names(SASL_MECHANISMS),
    "connection.failed.authentication.delay.ms": _integer(0, 60_000),
    "kshim.ssl.handshake.timeout.ms": _integer(1, 300_000),
    "kshim.failed.authentication.burst": _integer(0, 1_000_000),
    "kshim.failed.authentication.rate": _integer(1, 1_000_000),
    "ssl.keystore.type": _choice("PEM"),
    "ssl.truststore.type": _choice("PEM"),
    "ssl.client.auth": _choice("none", "requested", "required"),
    "ssl.protocol": _choice("TLSv1.2", "TLSv1.3", "TLS"),
    "ssl.enabled.protocols": _tls_versions,
    "authorizer.class.name": _authorizer,
    "allow.everyone.if.no.acl.found": _boolean,
}

# Keys a listener may override with ``listener.name.<listener>.<key>``.
LISTENER_OVERRIDABLE = frozenset(
    key for key in SECURITY_DEFAULTS if key.startswith(("ssl.", "sasl.enabled.", "connection."))
)
_LISTENER_KEY = re.compile(r"listener\.name\.([a-z0-9_]+)\.(.+)")
_JAAS_KEY = re.compile(r"(plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config")


def listener_key(key: str) -> tuple[str, str] | None:
    """(listener, key) of a per-listener setting (``listener.name.sasl_ssl.ssl.client.auth``
    gives ``("SASL_SSL", "ssl.client.auth")``), or None for any other key."""
    match = _LISTENER_KEY.fullmatch(key)
    if match is None:
        return None
    name, rest = match.groups()
    if rest in LISTENER_OVERRIDABLE or _JAAS_KEY.fullmatch(rest):
        return name.upper(), rest
    return None


def security_validator(key: str) -> Callable[[str], str] | None:
    """The validator of a security key (a listener's override included), or None."""
    if key in SECURITY_VALIDATORS:
        return SECURITY_VALIDATORS[key]
    if key in SECURITY_DEFAULTS:
        return _any
    scoped = listener_key(key)
    if scoped is None:
        return None
    if _JAAS_KEY.fullmatch(scoped[1]):
        return _jaas
    return SECURITY_VALIDATORS.get(scoped[1], _any)
