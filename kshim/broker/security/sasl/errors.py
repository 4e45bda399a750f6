"""How an exchange fails, and the checks every mechanism makes of a token before reading
it."""

from __future__ import annotations

# A real token is tens of bytes (PLAIN) or a few hundred (SCRAM); this is far above both and
# far below the 512 KiB an unauthenticated frame may have (Kafka's
# sasl.server.max.receive.size), so no exchange parses a megabyte of garbage.
MAX_TOKEN_BYTES = 16 * 1024


class AuthenticationFailed(Exception):
    """The client did not authenticate. ``str()`` of it is the message the client is sent
    (SaslAuthenticate's error_message, with SASL_AUTHENTICATION_FAILED): it never says
    whether the user exists."""


def token_text(token: bytes, mechanism: str) -> str:
    """The token as text; raises AuthenticationFailed for one over MAX_TOKEN_BYTES or not
    UTF-8 (RFC 4616 and RFC 5802 both carry UTF-8)."""
    if len(token) > MAX_TOKEN_BYTES:
        raise AuthenticationFailed(
            f"Authentication failed: a {mechanism} token of {len(token)} bytes is over "
            f"{MAX_TOKEN_BYTES} bytes"
        )
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed(
            f"Authentication failed: the {mechanism} token is not UTF-8"
        ) from None
