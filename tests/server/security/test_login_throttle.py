"""The failed-login throttle's bucket (server/security/login_throttle.py)."""

from __future__ import annotations

from kshim.server.security.login_throttle import MAX_ADDRESSES, LoginThrottle


def _fail(throttle: LoginThrottle, address: str, now: float) -> None:
    login = throttle.admit(address, now)
    assert login is not None
    throttle.settle(login, failed=True, now=now)


def test_an_address_is_admitted_until_its_burst_of_failures_is_spent() -> None:
    throttle = LoginThrottle(burst=3, rate=1)
    for _ in range(3):
        _fail(throttle, "10.0.0.1", 0.0)
    assert throttle.admit("10.0.0.1", 0.0) is None
    assert throttle.admit("10.0.0.2", 0.0) is not None  # another address is not held back


def test_tokens_come_back_at_the_rate() -> None:
    throttle = LoginThrottle(burst=2, rate=4)
    _fail(throttle, "a", 0.0)
    _fail(throttle, "a", 0.0)
    assert throttle.admit("a", 0.1) is None  # 0.4 of a token
    assert throttle.wait_s("a", 0.1) == 0.15
    assert throttle.admit("a", 0.25) is not None  # one token back, taken by this login
    assert throttle.admit("a", 0.25) is None
    assert throttle.admit("a", 10.0) is not None


def test_an_address_that_failed_gets_no_more_logins_at_once_than_its_tokens() -> None:
    # Fifty connections at once from an address that failed before: each admitted one
    # holds a token until it settles, so a burst of connections cannot outrun the bucket.
    throttle = LoginThrottle(burst=3, rate=1)
    _fail(throttle, "a", 0.0)
    admitted = [throttle.admit("a", 0.0) for _ in range(50)]
    assert sum(login is not None for login in admitted) == 2


def test_a_login_that_authenticates_gives_its_token_back() -> None:
    throttle = LoginThrottle(burst=2, rate=1)
    _fail(throttle, "a", 0.0)
    for _ in range(100):  # a client that mistyped once then opens many connections
        login = throttle.admit("a", 0.0)
        assert login is not None
        throttle.settle(login, failed=False, now=0.0)
    assert throttle.wait_s("a", 0.0) == 0.0


def test_a_login_settles_once() -> None:
    throttle = LoginThrottle(burst=2, rate=1)
    _fail(throttle, "a", 0.0)
    login = throttle.admit("a", 0.0)
    assert login is not None
    throttle.settle(login, failed=True, now=0.0)  # the failure, as soon as it is known
    throttle.settle(login, failed=False, now=0.0)  # the connection's end: no refund
    assert throttle.admit("a", 0.0) is None


def test_logins_from_an_address_that_never_failed_take_nothing() -> None:
    throttle = LoginThrottle(burst=1, rate=1)
    logins = [throttle.admit("a", 0.0) for _ in range(1000)]
    assert all(login is not None and not login.reserved for login in logins)
    assert throttle.wait_s("a", 0.0) == 0.0


def test_a_full_bucket_never_holds_more_than_its_burst() -> None:
    throttle = LoginThrottle(burst=2, rate=1)
    _fail(throttle, "a", 0.0)
    login = throttle.admit("a", 1000.0)
    assert login is not None
    throttle.settle(login, failed=False, now=1000.0)
    _fail(throttle, "a", 1000.0)
    _fail(throttle, "a", 1000.0)
    assert throttle.admit("a", 1000.0) is None
    assert throttle.wait_s("a", 1000.0) == 1.0


def test_burst_zero_turns_it_off() -> None:
    throttle = LoginThrottle(burst=0, rate=1)
    assert not throttle.enabled
    for _ in range(100):
        _fail(throttle, "a", 0.0)
    assert throttle.admit("a", 0.0) is not None
    assert throttle.wait_s("a", 0.0) == 0.0


def test_the_table_of_addresses_is_bounded() -> None:
    throttle = LoginThrottle(burst=1, rate=1)
    for index in range(MAX_ADDRESSES + 10):
        throttle.failed(f"host-{index}", 0.0)
    assert len(throttle._buckets) <= MAX_ADDRESSES
    assert throttle.admit(f"host-{MAX_ADDRESSES + 9}", 0.0) is None  # the newest is kept
