"""SASL/PLAIN's server (RFC 4616), as Kafka's PlainSaslServer answers it.

One step: the client sends ``authzid NUL authcid NUL password`` (UTF-8) and the server
answers an empty token, or fails. The authorisation id must be empty or the user's own
name: kshim, as Kafka, lets no user act as another. The failure messages are Kafka's.
Run it only over TLS outside a test: the password crosses the connection as it is.
"""

from __future__ import annotations

from kshim.broker.security.credentials import Credentials
from kshim.broker.security.sasl.errors import AuthenticationFailed, token_text

MECHANISM = "PLAIN"
SEPARATOR = "\x00"
FIELDS = 3  # authzid, authcid, password


class PlainExchange:
    """One connection's PLAIN exchange; not thread-safe (one connection's)."""

    def __init__(self, listener: str, credentials: Credentials) -> None:
        self._listener = listener
        self._credentials = credentials
        self._user = ""
        self._complete = False
        self._stepped = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def user(self) -> str:
        return self._user

    def step(self, token: bytes) -> bytes:
        """Checks the client's one token; returns the empty answer once the user is
        authenticated. Raises AuthenticationFailed for a malformed token, an unknown
        user, a wrong password, another user's authorisation id, or any second step."""
        if self._stepped:
            raise AuthenticationFailed("Authentication failed: SASL/PLAIN takes one token")
        self._stepped = True
        authorization_id, user, password = _fields(token_text(token, MECHANISM))
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if not self._credentials.check_plain(self._listener, user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._user = user
        self._complete = True
        return b""


def _fields(text: str) -> tuple[str, str, str]:
    """(authzid, authcid, password); raises AuthenticationFailed unless there are exactly
    three. Counted as Kafka's PlainSaslServer.extractTokens counts, up to four."""
    fields = text.split(SEPARATOR, FIELDS)
    if len(fields) != FIELDS:
        raise AuthenticationFailed(
            f"Invalid SASL/PLAIN response: expected {FIELDS} tokens, got {len(fields)}"
        )
    authorization_id, user, password = fields
    return authorization_id, user, password
