"""The broker's time: the wall clock for calendar instants, a monotonic clock for durations.

What reads which (a wall-clock step, NTP's or an operator's, must move only the first):

- ``clock()``, wall time in ms as the system has it: record and LogAppendTime timestamps,
  a delayed record's due time (an instant its producer chose, by its own wall clock;
  QMQ schedules on the wall clock too), committed offsets' timestamps, the start time
  DescribeTransactions reports. Kafka's brokers read Time.milliseconds the same way.
  A step forward makes the records due in between due: that is what their producers
  asked for, and neither Kafka nor QMQ can tell a correction from an error. A step back
  leaves what was delivered delivered (the schedule's delivery marks are positions, not
  times: kshim/storage/schedule/delay_store.py) and the rest falls due by the wall clock as it
  now reads. Holding the clock where it was until the wall clock caught up was
  considered and refused: after a correction it would deliver records produced for
  "five minutes from now" at once, early by up to the step, and after a day's mistake
  undone it would stamp a day's records with one frozen time.
- ``monotonic()``, ms on a clock that steps never move (CLOCK_BOOTTIME where there is
  one, so a suspended machine's sleep counts as time passed): durations. Transaction
  timeouts and their reviews (Kafka's TransactionStateManager reads the wall clock here;
  a step forward would time every open transaction out at once, a step back put them
  off), group sessions, rebalance timeouts and the initial delay, fetch sessions' idle
  eviction, how long an alarm's condition has held.
- ``expiry_now()``, what deleting by age compares stored wall timestamps with (retention.ms
  on segments' newest timestamps as Kafka's UnifiedLog.deleteRetentionMsBreachedSegments
  does, delete.retention.ms for tombstones, offsets.retention.minutes, transactional and
  producer id expiry): ``clock()``, but never
  ahead of the wall time this process started at plus the monotonic time since. A step
  back deletes nothing that was kept (records stamped before it look newer, never
  older), and a step forward deletes nothing early; the cost is that after a forward
  step that corrected a wrong clock, data is kept longer by the step until the broker
  restarts (the warning says so). Kafka's retention would delete at once; losing a
  day of data to a mistyped ``date -s`` is the worse failure.

A step is noticed when wall time minus monotonic time moves by more than
STEP_THRESHOLD_MS between two readings (on Linux NTP slews both clocks alike, so only a
step moves it) and logged once as a WARNING saying by how much. A step while the broker
is stopped is not noticed: a new process cannot tell it from downtime. Then delivered
records stay delivered (the marks are on disk), an open transaction is given at most its
timeout from the start (TransactionCoordinator), and retention goes by the wall clock.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# Smaller moves are not worth an operator's attention (ntpd steps past 128 ms, chrony as
# configured by makestep); they still move ``clock()`` and ``expiry_now()`` as usual.
STEP_THRESHOLD_MS = 1_000
_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)  # Linux only


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds on CLOCK_BOOTTIME (monotonic, counting suspend) where the platform has
    it, else on time.monotonic."""
    if _BOOTTIME is not None:
        return time.clock_gettime_ns(_BOOTTIME) // 1_000_000
    return time.monotonic_ns() // 1_000_000


class BrokerClock:
    """Callable as the broker's wall clock (``clock()``, ms); safe from any thread."""

    def __init__(
        self,
        wall: Callable[[], int] = wall_clock_ms,
        monotonic: Callable[[], int] = monotonic_ms,
        step_threshold_ms: int = STEP_THRESHOLD_MS,
    ) -> None:
        self._wall = self.wall_clock = wall  # the one read: the system's, or a test's fake
        self._monotonic = monotonic
        self._threshold = step_threshold_ms
        self._lock = threading.Lock()
        wall_now, monotonic_now = wall(), monotonic()
        self._offset = wall_now - monotonic_now  # moved by each step noticed
        self._start_offset = self._offset  # expiry never runs ahead of this line
        self.steps_ms: list[int] = []  # each step noticed, signed (for tests and metrics)

    def __call__(self) -> int:
        """Wall time in ms (a step noticed is logged)."""
        return self._read()[0]

    def monotonic(self) -> int:
        """Milliseconds on the monotonic clock: only differences mean anything."""
        return self._monotonic()

    def expiry_now(self) -> int:
        """The time deletions by age go by: ``clock()``, but never past the wall time this
        process started at plus the monotonic time elapsed since."""
        wall_now, monotonic_now = self._read()
        return min(wall_now, monotonic_now + self._start_offset)

    def _read(self) -> tuple[int, int]:
        wall_now, monotonic_now = self._wall(), self._monotonic()
        step = wall_now - monotonic_now - self._offset
        if abs(step) > self._threshold:
            with self._lock:  # one warning per step, whichever thread sees it first
                step = wall_now - monotonic_now - self._offset
                if abs(step) > self._threshold:
                    self._offset += step
                    self.steps_ms.append(step)
                    _warn(step, wall_now)
        return wall_now, monotonic_now


def _warn(step: int, wall_now: int) -> None:
    size = f"{abs(step)} ms ({datetime.timedelta(milliseconds=abs(step))})"
    if step < 0:
        log.warning(
            "wall clock stepped back by %s to %s; delayed records already delivered stay "
            "delivered and the others fall due by the wall clock as it now reads; "
            "transaction and group session timeouts run on the monotonic clock; retention "
            "deletes nothing it would not have deleted before the step",
            size, _iso(wall_now),
        )  # fmt: skip
    else:
        log.warning(
            "wall clock stepped forward by %s to %s; delayed records due in between are "
            "delivered now; transaction and group session timeouts run on the monotonic "
            "clock; retention and other expiry by age keep to the time this broker started "
            "plus the time elapsed since (restart the broker if the step corrected a wrong "
            "clock)",
            size, _iso(wall_now),
        )  # fmt: skip


def as_broker_clock(clock: Callable[[], int]) -> BrokerClock:
    """``clock`` if it is a BrokerClock; otherwise one reading ``clock`` as both its wall
    and its monotonic time (a test's fake clock: advancing it moves durations too)."""
    if isinstance(clock, BrokerClock):
        return clock
    return BrokerClock(clock, clock)


def _iso(epoch_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
