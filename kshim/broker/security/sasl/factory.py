"""Starts the server side of a SASL mechanism's exchange by the mechanism's name (what
SaslHandshake names)."""

from __future__ import annotations

from kshim.broker.security.credentials import Credentials
from kshim.broker.security.sasl.plain import MECHANISM as PLAIN
from kshim.broker.security.sasl.plain import PlainExchange
from kshim.broker.security.session import SaslExchange
from kshim.protocol.scram_mechanisms import MECHANISMS as SCRAM_MECHANISMS

MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)


def start_exchange(mechanism: str, listener: str, credentials: Credentials) -> SaslExchange:
    """A new exchange of ``mechanism`` on a connection of ``listener`` (its name); raises
    ValueError for a mechanism kshim does not offer. Whether the listener enables the
    mechanism (``sasl.enabled.mechanisms``) is the caller's to check."""
    if mechanism == PLAIN:
        return PlainExchange(listener, credentials)
    if mechanism in SCRAM_MECHANISMS:
        # Imported at the first SCRAM login: scramp and asn1crypto cost a broker that
        # serves no SASL about 5 MB and its start-up time.
        from kshim.broker.security.sasl.scram import ScramExchange

        return ScramExchange(mechanism, credentials)
    raise ValueError(f"SASL mechanism {mechanism!r} is not one of {', '.join(MECHANISMS)}")
