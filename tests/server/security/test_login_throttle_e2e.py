"""The failed-login throttle in a running broker: an address that keeps failing to log in
has its new connections closed before their TLS handshake, while other addresses (here
127.0.0.2 guesses, 127.0.0.1 works) and connections already made are served as before.

Every wait is bounded; only the broker started here is stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kshim.client_sasl import AuthenticationFailed
from kshim.wire_client import WireConnection, parse_bootstrap
from tests.secured_broker import SecuredBroker, running_secured_broker

pytestmark = pytest.mark.timeout(120)

BURST = 5
GUESSES = 25
GUESSER = "127.0.0.2"  # another loopback address: another peer to the broker
METADATA = (3, 12)
INVALID = "Authentication failed: Invalid username or password"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    settings = [f"kshim.failed.authentication.burst={BURST}", "kshim.failed.authentication.rate=1"]
    with running_secured_broker(tmp_path_factory.mktemp("throttle"), settings) as running:
        yield running


def login(broker: SecuredBroker, password: str, source: str | None = None) -> WireConnection:
    host, port = parse_bootstrap(broker.secured)
    security = broker.security("PLAIN", "alice", password)
    return WireConnection(host, port, 10.0, security=security, source_host=source)


def guess(broker: SecuredBroker) -> str:
    """How a wrong password from GUESSER ends: "refused" with Kafka's message, or
    "closed" before a word (the throttle)."""
    try:
        login(broker, "wrong", GUESSER).close()
    except AuthenticationFailed as failure:
        assert INVALID in str(failure)
        return "refused"
    except OSError:
        return "closed"
    raise AssertionError("a wrong password was accepted")


def test_a_guessing_address_is_cut_off_and_nobody_else_is(broker: SecuredBroker) -> None:
    with login(broker, "alice-secret") as working:
        outcomes = [guess(broker) for _ in range(GUESSES)]
        # The burst is spent on refusals with the reason; after it, at most the one token
        # a second brings back is, and every other guess is closed unserved.
        refused = outcomes.count("refused")
        assert BURST <= refused < GUESSES // 2, outcomes
        assert outcomes[:BURST] == ["refused"] * BURST
        assert outcomes.count("closed") == GUESSES - refused
        # A connection made before is served; a new login from another address works.
        assert working.call(*METADATA, {"topics": None}).brokers
        with login(broker, "alice-secret") as fresh:
            assert fresh.call(*METADATA, {"topics": None}).brokers


def test_the_guessing_address_gets_a_try_again_once_tokens_come_back(
    broker: SecuredBroker,
) -> None:
    time.sleep(1.5)  # one token a second
    with login(broker, "alice-secret", GUESSER) as allowed:
        assert allowed.call(*METADATA, {"topics": None}).brokers


def test_the_log_says_why(broker: SecuredBroker) -> None:
    text = broker.log_path.read_text(encoding="utf-8", errors="replace")
    assert "authentication failed (PLAIN)" in text
