"""The failed-login throttle's bucket (server/security/login_throttle.py)."""

from __future__ import annotations

from kshim.server.security.login_throttle import MAX_ADDRESSES, LoginThrottle


def test_an_address_is_admitted_until_its_burst_of_failures_is_spent() -> None:
    throttle = LoginThrottle(burst=3, rate=1)
    for _ in range(3):
        assert throttle.admits("10.0.0.1", 0.0)
        throttle.failed("10.0.0.1", 0.0)
    assert not throttle.admits("10.0.0.1", 0.0)
    assert throttle.admits("10.0.0.2", 0.0)  # another address is not held back


def test_tokens_come_back_at_the_rate() -> None:
    throttle = LoginThrottle(burst=2, rate=4)
    throttle.failed("a", 0.0)
    throttle.failed("a", 0.0)
    assert not throttle.admits("a", 0.1)  # 0.4 of a token
    assert throttle.admits("a", 0.25)  # one token back
    throttle.failed("a", 0.25)
    assert not throttle.admits("a", 0.25)
    assert throttle.admits("a", 10.0)


def test_a_full_bucket_never_holds_more_than_its_burst() -> None:
    throttle = LoginThrottle(burst=2, rate=1)
    throttle.failed("a", 0.0)
    assert throttle.admits("a", 1000.0)
    throttle.failed("a", 1000.0)
    throttle.failed("a", 1000.0)
    assert not throttle.admits("a", 1000.0)


def test_burst_zero_turns_it_off() -> None:
    throttle = LoginThrottle(burst=0, rate=1)
    assert not throttle.enabled
    for _ in range(100):
        throttle.failed("a", 0.0)
    assert throttle.admits("a", 0.0)


def test_the_table_of_addresses_is_bounded() -> None:
    throttle = LoginThrottle(burst=1, rate=1)
    for index in range(MAX_ADDRESSES + 10):
        throttle.failed(f"host-{index}", 0.0)
    assert len(throttle._buckets) <= MAX_ADDRESSES
    assert not throttle.admits(f"host-{MAX_ADDRESSES + 9}", 0.0)  # the newest is kept
