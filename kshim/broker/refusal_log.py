"""Refusals logged for the operator: each kind once per topic and minute, at WARNING.

A client is told why its request was refused in the error code, and in Produce v8+ also
in ``error_message`` (KIP-467). librdkafka, and so confluent-kafka, reports only the
code's generic text ("Broker: Invalid request"), and Fetch and ListOffsets carry no
message at all; so the reason a topic refused a request (a read-only view, a delay record
without a due time, a write-only delay companion, the companion of no topic) is logged by
the broker too, with the topic and the client id. A refused client retries, often many
times a second, so one line per kind of refusal (its error code) and topic per minute is
enough to tell what happened without flooding the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kshim.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

INTERVAL_MS = 60_000  # one line per kind and topic this often at most
# Remembered (kind, topic) pairs before those logged over a minute ago are forgotten: an
# unbounded number of names (a client naming random companions of no topic) must not grow
# the memory.
REMEMBERED = 1_024


class RefusalLog:
    """Logs refusals at WARNING, rate-limited per (error code, topic); event-loop thread
    only. ``monotonic_ms`` reads milliseconds on a clock a wall-clock step does not move
    (the broker's ``clock.monotonic``; a test's fake clock)."""

    def __init__(self, monotonic_ms: Callable[[], int], interval_ms: int = INTERVAL_MS) -> None:
        self._now = monotonic_ms
        self._interval_ms = interval_ms
        self._logged_at: dict[tuple[ErrorCode, str], int] = {}

    def refused(
        self, request: str, topic: str, client_id: str | None, code: ErrorCode, reason: str
    ) -> bool:
        """Logs ``request`` (the API's name, "Produce") refused for ``topic`` with ``code``
        and ``reason``, unless a refusal with the same code for the same topic was logged
        less than a minute ago; returns whether it logged."""
        now = self._now()
        key = (ErrorCode(code), topic)
        logged_at = self._logged_at.get(key)
        if logged_at is not None and now - logged_at < self._interval_ms:
            return False
        if len(self._logged_at) >= REMEMBERED:
            self._forget_before(now - self._interval_ms)
        self._logged_at[key] = now
        log.warning(
            "%s refused: topic %s, client %r, %s: %s",
            request,
            topic,
            client_id,
            key[0].name.upper(),
            reason,
        )
        return True

    @property
    def remembered(self) -> int:
        """How many (kind, topic) pairs it holds now (at most about REMEMBERED, plus those
        logged within the last minute)."""
        return len(self._logged_at)

    def _forget_before(self, cutoff_ms: int) -> None:
        self._logged_at = {
            key: logged_at for key, logged_at in self._logged_at.items() if logged_at > cutoff_ms
        }
