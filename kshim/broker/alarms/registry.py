"""Which alarms are raised, said once each: a condition (a group lagging, the disk
filling) is raised when it starts to hold and cleared when it stops, and said nothing in
between however often it is checked; an event (a transaction aborted undecided) is said
once when it happens. Event-loop thread only."""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

RAISED, CLEARED, HAPPENED = "raised", "cleared", "happened"


@dataclass(frozen=True, slots=True)
class Alarm:
    kind: str  # what is wrong: group_lag, disk_free, view_lag, fsync_p99, ...
    subject: str  # where: a group and partition, a topic, the data directory
    value: float  # what was measured
    threshold: float  # what it was held against
    message: str  # one sentence for a person
    state: str = RAISED  # RAISED, CLEARED or HAPPENED
    at_ms: int = 0  # wall-clock time it was said

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind, "subject": self.subject, "value": self.value,
            "threshold": self.threshold, "message": self.message, "state": self.state,
            "at_ms": self.at_ms,
        }  # fmt: skip


Notify = Callable[[Alarm], None]


class Alarms:
    def __init__(self, notify: Notify | None = None) -> None:
        self.active: dict[tuple[str, str], Alarm] = {}
        self.raised: collections.Counter[str] = collections.Counter()  # by kind, ever
        self._notify = notify

    def hold(self, kind: str, subject: str, value: float, threshold: float, message: str) -> None:
        """The condition ``kind`` holds for ``subject``: raised unless it already is."""
        key = (kind, subject)
        if key in self.active:
            return
        alarm = Alarm(kind, subject, value, threshold, message, RAISED, _now_ms())
        self.active[key] = alarm
        self._say(alarm, logging.ERROR)

    def release(self, kind: str, subject: str, value: float) -> None:
        """The condition ``kind`` no longer holds for ``subject``: cleared if it was raised."""
        raised = self.active.pop((kind, subject), None)
        if raised is None:
            return
        message = f"cleared: {raised.message}"
        cleared = Alarm(kind, subject, value, raised.threshold, message, CLEARED, _now_ms())
        self._say(cleared, logging.WARNING)

    def check(self, kind: str, subject: str, value: float, threshold: float, message: str,
              holds: bool) -> None:  # fmt: skip
        """``hold`` or ``release``, as ``holds`` says."""
        if holds:
            self.hold(kind, subject, value, threshold, message)
        else:
            self.release(kind, subject, value)

    def happened(
        self, kind: str, subject: str, value: float, threshold: float, message: str
    ) -> None:
        """An event: said once, never active."""
        self._say(Alarm(kind, subject, value, threshold, message, HAPPENED, _now_ms()),
                  logging.ERROR)  # fmt: skip

    def forget(self, kind: str, keep: Callable[[str], bool]) -> None:
        """Clears the ``kind`` alarms whose subject is gone (a deleted group or topic)."""
        for key in [key for key in self.active if key[0] == kind and not keep(key[1])]:
            self.release(kind, key[1], float("nan"))

    def _say(self, alarm: Alarm, level: int) -> None:
        if alarm.state != CLEARED:
            self.raised[alarm.kind] += 1
        log.log(level, "ALARM: %s (kind=%s subject=%s value=%g threshold=%g state=%s)",
                alarm.message, alarm.kind, alarm.subject, alarm.value, alarm.threshold,
                alarm.state)  # fmt: skip
        if self._notify is not None:
            self._notify(alarm)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
