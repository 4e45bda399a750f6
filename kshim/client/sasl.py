"""The client's side of a SASL exchange, one token at a time, as SaslAuthenticate carries
them (KIP-152): PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677; KIP-84).

``first()`` is the token to send first; ``step(answer)`` takes the broker's answer to the
last token and returns the next one, or None once the exchange is complete. PLAIN is one
token; SCRAM is client-first, then client-final, then the broker's server-final, whose
signature proves that the broker knows the password too (a broker that does not is
refused, though it said yes).
"""

from __future__ import annotations

from typing import Protocol


class AuthenticationFailed(Exception):
    """The broker refused the SASL authentication, or its answer did not verify; the
    message is the broker's error_message where it gave one."""


class SaslClient(Protocol):
    def first(self) -> bytes: ...

    def step(self, answer: bytes) -> bytes | None: ...


class PlainClient:
    """PLAIN: the message ``authzid NUL authcid NUL passwd`` with no authzid, as Kafka's
    Java client sends it."""

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self._token

    def step(self, answer: bytes) -> bytes | None:
        return None  # the broker's empty answer with no error: authenticated


class ScramClientExchange:
    """SCRAM-SHA-256 or -512 through scramp. scramp applies SASLprep (RFC 4013) to the name
    and password, which Kafka's Java client does not: the two agree on every password but
    those SASLprep changes (non-ASCII compatibility characters, some spaces)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        # Imported here: every kshim command (and `kshim serve`) imports this module, and
        # scramp with asn1crypto costs about 5 MB to a process that never logs in.
        from scramp import ScramClient, ScramException  # type: ignore[import-untyped]

        try:
            self._scram = ScramClient([mechanism], username, password)
        except ScramException as error:
            # scramp's message may quote the character it refuses: not repeated.
            raise AuthenticationFailed(
                f"the user name or password cannot be used with {mechanism} (SASLprep)"
            ) from error
        self._mechanism = mechanism
        self._answers = 0

    def first(self) -> bytes:
        return str(self._scram.get_client_first()).encode()

    def step(self, answer: bytes) -> bytes | None:
        """client-final for the server-first, then None once server-final verifies."""
        from scramp import ScramException

        self._answers += 1
        try:
            message = answer.decode()
            if self._answers == 1:
                self._scram.set_server_first(message)
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(message)
        except (ScramException, UnicodeDecodeError) as error:
            raise AuthenticationFailed(
                f"the broker's {self._mechanism} answer does not verify: {error}"
            ) from error
        return None


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """The client side of ``mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); raises
    ValueError for another, AuthenticationFailed for SCRAM credentials SASLprep refuses."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramClientExchange(mechanism, username, password)
    raise ValueError(f"SASL mechanism {mechanism} is not supported")
