"""How kshim's client says a failure in one line: an OSError in the system's words, an
error code in an answer by Kafka's name for it, and a broker that broke off a request,
with a hint when the connection was a plain one. The ``kshim`` commands print these lines
as they are."""

from __future__ import annotations

import os
import ssl

from kshim.client.security import ClientSecurity
from kshim.protocol.errors import ErrorCode


def reason(error: OSError) -> str:
    """What went wrong, in the system's words and without the ``[Errno N]`` prefix:
    ``no such file or directory``; an error without an errno says its own message, and a
    TLS error OpenSSL's reason (its errno is OpenSSL's error kind, no system errno)."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"the broker's TLS certificate does not verify: {error.verify_message}"
    if isinstance(error, ssl.SSLError):
        return f"TLS: {(error.reason or error.strerror or str(error)).replace('_', ' ').lower()}"
    if error.errno is not None and error.errno > 0:
        return os.strerror(error.errno).lower()
    return str(error.strerror or error)


def error_name(error_code: int) -> str:
    """Kafka's name of an error code (NON_EMPTY_GROUP), or its number when unknown."""
    try:
        return ErrorCode(error_code).name.upper()
    except ValueError:
        return f"error code {error_code}"


def check_answer(
    error: type[Exception], error_code: int, what: str, message: str | None = None
) -> None:
    """Raises ``error`` unless ``error_code`` is NONE: ``what``, Kafka's name for the
    error, and the broker's own message when it sent one (``cannot create topic t:
    INVALID_CONFIG (...)``)."""
    if error_code != 0:
        said = f" ({message})" if message else ""
        raise error(f"{what}: {error_name(error_code)}{said}")


# A TLS listener closes a plain connection at its first bytes (they are no TLS handshake),
# and a SASL listener one that sends requests before authenticating (KIP-43): both look
# to a client like a broker hanging up without a word, so the line says what to check.
PLAIN_CONNECTION_HINT = (
    " (if that listener wants TLS or SASL, give --command-config with its security.protocol)"
)


def broken_off(bootstrap: str, what: str, error: Exception, security: ClientSecurity | None) -> str:
    """The line for a broker that closed the connection or answered something malformed
    during ``what`` (``request``, ``read``, ...); with the hint about secured listeners
    when the connection was a plain one (``security`` None or PLAINTEXT)."""
    line = f"{bootstrap} broke off the {what}: {error}"
    plain = security is None or security.protocol == "PLAINTEXT"
    return line + PLAIN_CONNECTION_HINT if plain else line
