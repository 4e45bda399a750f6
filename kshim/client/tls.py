"""A Kafka client's TLS context, from PEM stores as Kafka's clients take them (KIP-651).

The trusted CAs are a PEM file or PEM text (none given: the system's CAs, as a Java client
without a truststore uses the JVM's). The client's own certificate, when the broker asks
for one (``ssl.client.auth``), is its private key with the certificate chain: one PEM file
holding both, each in a file of its own, or each inline. An encrypted key (PKCS#8
``ENCRYPTED PRIVATE KEY``) is opened with ``ssl.key.password``.

Inline PEM in a properties file often comes joined onto one logical line (a value spanning
lines with ``\\`` continuations), its line breaks turned into spaces. Kafka's PEM reader
takes it so, OpenSSL does not: each block's base64 is wrapped again at 64 columns.

The broker's certificate chain is always verified; its name is checked against the host
connected to (RFC 6125) unless ``check_hostname`` is off. Only TLS 1.2 and 1.3 are spoken
(RFC 8996 deprecates older versions).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
CERTIFICATE = re.compile(r"-----BEGIN (X509 |TRUSTED )?CERTIFICATE-----")
PRIVATE_KEY = re.compile(r"-----BEGIN ([A-Z]+ |ENCRYPTED )?PRIVATE KEY-----")
PEM_LINE = 64  # RFC 7468: base64 lines of 64 characters
NOT_PEM_HINT = (
    "kshim's client reads PEM only (export a JKS or PKCS12 store to PEM with keytool "
    "-exportcert -rfc, or openssl pkcs12 -nodes)"
)


class TlsSettingsError(ValueError):
    """TLS material that cannot be used: a file not readable or not PEM, a key that does
    not open or does not match its certificate. Never says a secret."""


@dataclass(frozen=True, slots=True)
class Pem:
    """PEM text from the file at ``path`` or given inline as ``text``; ``setting`` is the
    client setting it came from, named in errors."""

    setting: str
    path: str | None = None
    text: str | None = field(default=None, repr=False)  # may hold a private key

    @property
    def where(self) -> str:
        return self.setting if self.path is None else f"{self.setting} {self.path}"

    def blocks(self) -> list[str]:
        """The PEM blocks, each wrapped at 64 columns; raises TlsSettingsError when the
        file cannot be read or holds no PEM block."""
        if self.path is None:
            return pem_blocks(self.text or "", self.where)
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise TlsSettingsError(f"cannot read {self.where}: {_os_reason(error)}") from error
        # PEM is ASCII; Latin-1 decodes any bytes, so a binary store reaches the check below.
        return pem_blocks(data.decode("latin-1"), self.where)


def pem_blocks(text: str, where: str) -> list[str]:
    """Every PEM block of ``text``, its base64 wrapped at 64 columns (a block with headers,
    legacy encrypted PEM, is kept as it is); raises TlsSettingsError when there is none."""
    blocks = []
    for found in PEM_BLOCK.finditer(text):
        label, body = found.group(1), found.group(2)
        if ":" not in body:
            body = "\n".join(textwrap.wrap("".join(body.split()), PEM_LINE))
        blocks.append(f"-----BEGIN {label}-----\n{body.strip()}\n-----END {label}-----\n")
    if not blocks:
        raise TlsSettingsError(f"{where} is not PEM: {NOT_PEM_HINT}")
    return blocks


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """What a client's TLS context is made of."""

    trusted: Pem | None = None  # None: the system's CAs
    chain: Pem | None = None  # the client certificate chain (with ``key``), or None
    key: Pem | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    def context(self) -> ssl.SSLContext:
        """A new client context; raises TlsSettingsError. Reads the files each time, so a
        renewed certificate is used by the next connection."""
        context = self._trusting()
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # verify_mode stays CERT_REQUIRED: a Java client without a hostname check still
        # verifies the chain.
        context.check_hostname = self.check_hostname
        if self.chain is not None and self.key is not None:
            self._load_identity(context, self.chain, self.key)
        return context

    def _trusting(self) -> ssl.SSLContext:
        if self.trusted is None:
            return ssl.create_default_context()
        certificates = _holding(self.trusted, CERTIFICATE, "certificate")
        try:
            return ssl.create_default_context(cadata=certificates)
        except ssl.SSLError as error:
            message = f"{self.trusted.where} holds no usable CA certificate: {_ssl_reason(error)}"
            raise TlsSettingsError(message) from error

    def _load_identity(self, context: ssl.SSLContext, chain: Pem, key: Pem) -> None:
        # Checked first: OpenSSL says "PEM lib" for a missing key or certificate alike.
        key_text = _holding(key, PRIVATE_KEY, "private key")
        chain_text = _holding(chain, CERTIFICATE, "certificate")
        where = chain.where if chain == key else f"{key.where} and {chain.where}"
        try:
            if chain.path is not None and key.path is not None:
                context.load_cert_chain(chain.path, key.path, self._password())
            else:
                _load_inline_identity(context, key_text + chain_text, self._password())
        except ssl.SSLError as error:
            reason = _ssl_reason(error)
            if "PEM lib" in reason or "bad decrypt" in reason:
                reason = "the private key does not open with ssl.key.password"
            message = f"cannot use the client key and certificate of {where}: {reason}"
            raise TlsSettingsError(message) from error

    def _password(self) -> Callable[[], str]:
        """The key's password when OpenSSL asks for it: without this, OpenSSL would prompt
        for it on the terminal."""
        password = self.key_password

        def ask() -> str:
            if password is None:
                raise TlsSettingsError(
                    "the client's private key is encrypted: set ssl.key.password"
                )
            return password

        return ask


def _holding(pem: Pem, label: re.Pattern[str], what: str) -> str:
    """The blocks of ``pem`` whose label matches ``label``; raises TlsSettingsError when
    there is none."""
    blocks = [block for block in pem.blocks() if label.match(block)]
    if not blocks:
        raise TlsSettingsError(f"{pem.where} holds no {what}")
    return "".join(blocks)


def _load_inline_identity(context: ssl.SSLContext, pem: str, password: Callable[[], str]) -> None:
    """Loads a key and chain given as text: Python's ssl reads them from a file only, so
    they go through one in a directory only this user can read, removed at once."""
    with tempfile.TemporaryDirectory(prefix="kshim-client-") as directory:
        path = os.path.join(directory, "identity.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(pem)
        context.load_cert_chain(path, password=password)


def _ssl_reason(error: Exception) -> str:
    reason = getattr(error, "reason", None)
    return str(reason).replace("_", " ").lower() if reason else str(error)


def _os_reason(error: OSError) -> str:
    return error.strerror or str(error)
