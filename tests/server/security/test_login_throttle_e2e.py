"""The failed-login throttle in a running broker: an address that keeps failing to log in
has its new connections held and closed before their TLS handshake, and no more logins at
once than its tokens, while other addresses (here 127.0.0.2 guesses, 127.0.0.1 works) and
connections already made are served as before.

Every wait is bounded; only the broker started here is stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from kshim.client.sasl import AuthenticationFailed
from kshim.client.wire import WireConnection, parse_bootstrap
from tests.secured_broker import SecuredBroker, running_secured_broker

pytestmark = pytest.mark.timeout(120)

BURST = 5
RATE = 1  # tokens a second
GUESSES = 10
AT_ONCE = 50
# A refused guess right after a failed one waits most of a second for the next token; this
# is well under it and well over what closing at once takes.
MIN_HOLD_S = 0.25
GUESSER = "127.0.0.2"  # another loopback address: another peer to the broker
METADATA = (3, 12)
INVALID = "Authentication failed: Invalid username or password"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    settings = [
        f"kshim.failed.authentication.burst={BURST}",
        f"kshim.failed.authentication.rate={RATE}",
    ]
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


def _timed_guess(broker: SecuredBroker) -> tuple[str, float]:
    started = time.monotonic()
    outcome = guess(broker)
    return outcome, time.monotonic() - started


def test_a_guessing_address_is_cut_off_and_nobody_else_is(broker: SecuredBroker) -> None:
    with login(broker, "alice-secret") as working:
        started = time.monotonic()
        timed = [_timed_guess(broker) for _ in range(GUESSES)]
        elapsed = time.monotonic() - started
        outcomes = [outcome for outcome, _ in timed]
        # The burst is spent on refusals with the reason; after it, only the one token a
        # second brings back is, and every other guess is closed unserved.
        assert outcomes[:BURST] == ["refused"] * BURST
        assert outcomes.count("refused") <= BURST + elapsed * RATE + 1, (outcomes, elapsed)
        assert "closed" in outcomes
        # A refused connection is held until a token is back, not closed at once: a guesser
        # waiting for the broker cannot loop as fast as it can connect.
        held = [seconds for outcome, seconds in timed if outcome == "closed"]
        assert min(held) >= MIN_HOLD_S, timed
        # A connection made before is served; a new login from another address works.
        assert working.call(*METADATA, {"topics": None}).brokers
        with login(broker, "alice-secret") as fresh:
            assert fresh.call(*METADATA, {"topics": None}).brokers


def test_guesses_at_once_get_no_more_tries_than_the_tokens(broker: SecuredBroker) -> None:
    # Fifty connections at once from the address that failed: each admitted one holds a
    # token until it fails, so they get the tokens there are, not fifty tries.
    time.sleep(1.1 / RATE)  # one token back
    started = time.monotonic()
    with ThreadPoolExecutor(AT_ONCE) as pool:
        outcomes = list(pool.map(lambda _: guess(broker), range(AT_ONCE)))
    elapsed = time.monotonic() - started
    assert outcomes.count("refused") <= 1 + elapsed * RATE + 1, (outcomes, elapsed)
    assert outcomes.count("closed") >= AT_ONCE - 1 - elapsed * RATE - 1


def test_the_guessing_address_gets_a_try_again_once_tokens_come_back(
    broker: SecuredBroker,
) -> None:
    time.sleep(1.5)  # one token a second
    with login(broker, "alice-secret", GUESSER) as allowed:
        assert allowed.call(*METADATA, {"topics": None}).brokers


def test_the_log_says_why(broker: SecuredBroker) -> None:
    text = broker.log_path.read_text(encoding="utf-8", errors="replace")
    assert "authentication failed (PLAIN)" in text
