"""Steps a connection through its SASL exchange: the one place SaslHandshake,
SaslAuthenticate and SaslHandshake v0's raw tokens (KIP-152) change a session.

A failed step marks the session failed; the connection then answers (except in the raw
form, which has no way to carry an error), waits ``connection.failed.authentication.delay.ms``
and closes, as Kafka does (KIP-306), so a wrong password costs the guesser a connection
and that delay.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.credentials import Credentials
from kshim.broker.security.sasl.errors import AuthenticationFailed
from kshim.broker.security.sasl.factory import start_exchange
from kshim.broker.security.session import Session, user_principal


@dataclass(frozen=True, slots=True)
class StepResult:
    answer: bytes  # the server's token
    error: str | None = None  # why authentication failed, for the client


def enabled_mechanisms(session: Session, values: dict[str, str]) -> list[str]:
    """The mechanisms the session's listener offers (``sasl.enabled.mechanisms``)."""
    scoped = f"listener.name.{session.listener.lower()}.sasl.enabled.mechanisms"
    text = values.get(scoped, values.get("sasl.enabled.mechanisms", ""))
    return [name.strip() for name in text.split(",") if name.strip()]


def choose_mechanism(
    session: Session, mechanism: str, enabled: list[str], credentials: Credentials
) -> bool:
    """Starts the exchange of ``mechanism`` if the listener offers it; False (and the
    session failed) otherwise."""
    if mechanism not in enabled:
        session.failed = True
        return False
    session.mechanism = mechanism
    session.exchange = start_exchange(mechanism, session.listener, credentials)
    return True


async def step(session: Session, token: bytes) -> StepResult:
    """Feeds the client's token to the session's exchange; on its last step the session
    is authenticated as the exchange's user.

    The step runs in a worker thread: PLAIN checked against a stored SCRAM credential
    derives the salted password (PBKDF2, 2-25 ms, with the GIL released), and a flood of
    wrong passwords must not stall the event loop that serves everyone else."""
    exchange = session.exchange
    if exchange is None:
        session.failed = True
        return StepResult(b"", "SaslAuthenticate before SaslHandshake")
    try:
        answer = await asyncio.to_thread(exchange.step, token)
    except AuthenticationFailed as failure:
        session.failed = True
        return StepResult(b"", str(failure))
    if exchange.complete:
        session.principal = user_principal(exchange.user)
        session.authenticated = True
        session.exchange = None
        session.raw_tokens = False
    return StepResult(answer)


async def delay_failure(config: BrokerConfig, session: Session) -> None:
    """Waits ``connection.failed.authentication.delay.ms`` of the session's listener. The
    failure's answer itself waits it out, as Kafka's
    (Selector.maybeDelayCloseOnAuthenticationFailure): a client told at once would retry
    at once."""
    delay_ms = config.listener_value(session.listener, "connection.failed.authentication.delay.ms")
    await asyncio.sleep(int(delay_ms or 0) / 1000)
