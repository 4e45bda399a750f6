"""A fake wall clock and a fake monotonic clock for the clock-step tests
(kshim/broker/clock.py): time passing moves both, a step only the wall clock."""

from __future__ import annotations

from kshim.broker.clock import BrokerClock

NOW = 1_700_000_040_000  # a whole minute
START_MONOTONIC = 123_000  # the monotonic clock's zero is anywhere
SECOND, MINUTE, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000


class SteppedClocks:
    """A fake wall clock and a fake monotonic clock (ms): ``advance`` moves both (time
    passes), ``step`` the wall clock alone (NTP or an operator setting it)."""

    def __init__(self) -> None:
        self.wall_ms = NOW
        self.monotonic_ms = START_MONOTONIC

    def wall(self) -> int:
        return self.wall_ms

    def monotonic(self) -> int:
        return self.monotonic_ms

    def advance(self, milliseconds: int) -> None:
        self.wall_ms += milliseconds
        self.monotonic_ms += milliseconds

    def step(self, milliseconds: int) -> None:
        self.wall_ms += milliseconds

    def broker_clock(self) -> BrokerClock:
        """A new process's clock: a step before it is no step to it."""
        return BrokerClock(self.wall, self.monotonic)
