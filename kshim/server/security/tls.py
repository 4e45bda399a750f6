"""A listener's TLS context, built with Python's ``ssl`` from Kafka's SSL settings.

Kafka's PEM keystore (KIP-651) holds the private key and its certificate chain, in one
file (``ssl.keystore.location``) or inline (``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``); ``ssl.key.password`` decrypts an encrypted key.
The truststore lists the CAs whose client certificates are accepted
(``ssl.truststore.location`` or ``ssl.truststore.certificates``). Only TLS 1.2 and 1.3
are ever offered (RFC 8996 deprecates older versions).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable

from kshim.broker.config.broker_config import BrokerConfig

CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# The TLS 1.3 suites: OpenSSL names them as IANA does, and Python's ssl cannot narrow them
# (set_ciphers() covers TLS 1.2 and below only).
TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)


Setting = Callable[[str], str]  # a listener's value of a key


class TlsConfigError(Exception):
    """A listener's TLS settings cannot be used (a missing key, an unknown cipher suite)."""


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of one listener; raises TlsConfigError."""

    def setting(key: str) -> str:
        return config.listener_value(listener, key).strip()

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(context, setting)
    _load_truststore(context, setting)
    context.verify_mode = CLIENT_AUTH[setting("ssl.client.auth") or "none"]
    enabled = [VERSIONS[name] for name in setting("ssl.enabled.protocols").split(",") if name]
    context.minimum_version = min(enabled)
    context.maximum_version = max(enabled)
    suites = [name.strip() for name in setting("ssl.cipher.suites").split(",") if name.strip()]
    if suites:
        _restrict_suites(context, suites)
    # Resumed sessions skip the certificate exchange; tickets cost nothing to keep on.
    context.options |= ssl.OP_NO_COMPRESSION
    return context


def _load_keystore(context: ssl.SSLContext, setting: Setting) -> None:
    location = setting("ssl.keystore.location")
    password = setting("ssl.key.password") or None
    inline_key, inline_chain = (
        setting("ssl.keystore.key"),
        setting("ssl.keystore.certificate.chain"),
    )
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif inline_key and inline_chain:
            _load_inline_chain(context, inline_chain, inline_key, password)
        else:
            raise TlsConfigError(
                "no certificate: set ssl.keystore.location (a PEM file with the key and its "
                "certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain"
            )
    except (OSError, ssl.SSLError) as error:
        raise TlsConfigError(f"cannot load the keystore: {error}") from error


def _load_inline_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """Python's ssl loads a chain from files only: the inline PEM text goes through a file
    only this process can read, removed at once."""
    with tempfile.TemporaryDirectory(prefix="kshim-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(_pem_lines(key) + "\n" + _pem_lines(chain) + "\n")
        context.load_cert_chain(path, password=password)


def _pem_lines(text: str) -> str:
    """PEM text from a properties file, where Kafka's inline values may be written on one
    line: the blocks rebuilt with their line breaks."""
    if "\n" in text.strip():
        return text.strip()
    blocks = re.findall(r"(-----BEGIN [A-Z ]+-----)(.*?)(-----END [A-Z ]+-----)", text)
    return "\n".join(f"{begin}\n{''.join(body.split())}\n{end}" for begin, body, end in blocks)


def _load_truststore(context: ssl.SSLContext, setting: Setting) -> None:
    location = setting("ssl.truststore.location")
    certificates = setting("ssl.truststore.certificates")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        elif certificates:
            context.load_verify_locations(cadata=_pem_lines(certificates))
    except (OSError, ssl.SSLError) as error:
        raise TlsConfigError(f"cannot load the truststore: {error}") from error
    if not (location or certificates) and setting("ssl.client.auth") in ("requested", "required"):
        raise TlsConfigError(
            "ssl.client.auth asks for client certificates but no truststore is set "
            "(ssl.truststore.location or ssl.truststore.certificates)"
        )


def _restrict_suites(context: ssl.SSLContext, suites: list[str]) -> None:
    """Honours ``ssl.cipher.suites`` (IANA names as Java takes them, or OpenSSL names).
    A list without any TLS 1.3 suite caps the listener at TLS 1.2, since Python cannot
    narrow TLS 1.3's suites."""
    older = {name: _openssl_name(name) for name in suites if name not in TLS13_SUITES}
    if older:
        try:
            context.set_ciphers(":".join(older.values()))
        except ssl.SSLError as error:
            raise TlsConfigError(f"ssl.cipher.suites: no usable suite in {suites}") from error
        known = {cipher["name"] for cipher in context.get_ciphers()}
        unknown = [name for name, openssl in older.items() if openssl not in known]
        if unknown:
            raise TlsConfigError(f"ssl.cipher.suites: unknown or unusable {', '.join(unknown)}")
    if not any(name in TLS13_SUITES for name in suites):
        if context.minimum_version > ssl.TLSVersion.TLSv1_2:
            raise TlsConfigError("ssl.cipher.suites lists only TLS 1.2 suites but TLSv1.2 is off")
        context.maximum_version = ssl.TLSVersion.TLSv1_2


_IANA = re.compile(r"TLS_(?:(?P<kx>[A-Z0-9]+(?:_[A-Z0-9]+)?)_)?WITH_(?P<cipher>.+)_(?P<mac>SHA\d*)")
_CIPHERS = {
    "AES_128_GCM": "AES128-GCM",
    "AES_256_GCM": "AES256-GCM",
    "AES_128_CBC": "AES128",
    "AES_256_CBC": "AES256",
    "CHACHA20_POLY1305": "CHACHA20-POLY1305",
}


def _openssl_name(name: str) -> str:
    """OpenSSL's name of an IANA TLS 1.2 suite (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 is
    ECDHE-RSA-AES128-GCM-SHA256); an OpenSSL name is returned as it is."""
    match = _IANA.fullmatch(name)
    if match is None or match["cipher"] not in _CIPHERS:
        return name
    key_exchange = (match["kx"] or "").replace("_", "-")
    cipher = _CIPHERS[match["cipher"]]
    parts = [key_exchange] if key_exchange and key_exchange != "RSA" else []
    parts.append(cipher)
    if match["cipher"] != "CHACHA20_POLY1305":  # OpenSSL's ChaCha20 names carry no MAC
        parts.append(match["mac"])
    return "-".join(parts)
