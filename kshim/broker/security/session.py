"""One connection's security state: its listener, and who it has proved to be.

Kafka names the client by a principal string, ``User:<name>`` (KafkaPrincipal): the
user a SASL exchange authenticated, the subject of a TLS client certificate mapped by
``ssl.principal.mapping.rules``, or ``User:ANONYMOUS`` on a listener that asks neither.
Handlers read it; the SASL handlers (api/security/sasl_*.py) set it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

ANONYMOUS = "User:ANONYMOUS"
USER_TYPE = "User"


def user_principal(name: str) -> str:
    """The principal string of a user name, as Kafka prints it."""
    return f"{USER_TYPE}:{name}"


class SaslExchange(Protocol):
    """The server side of one SASL mechanism's exchange (security/sasl/)."""

    def step(self, token: bytes) -> bytes:
        """Takes the client's next token and returns the server's answer; raises
        AuthenticationFailed."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def user(self) -> str:
        """The authenticated user's name, once complete."""
        ...


@dataclass(slots=True)
class Session:
    listener: str = "PLAINTEXT"  # the listener's name (``SASL_SSL`` in ``SASL_SSL://:9094``)
    security_protocol: str = "PLAINTEXT"
    principal: str = ANONYMOUS
    client_address: str = ""  # the peer's IP address, as ACLs' host field matches it
    # SASL: the mechanism chosen by SaslHandshake, its exchange, and whether the tokens
    # come as raw frames (SaslHandshake v0) or inside SaslAuthenticate (v1).
    mechanism: str | None = None
    exchange: SaslExchange | None = None
    raw_tokens: bool = False
    authenticated: bool = True  # False until a SASL listener's exchange completes
    # Set when authentication failed: the connection is closed after Kafka's
    # connection.failed.authentication.delay.ms, once the answer is sent.
    failed: bool = False

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")
