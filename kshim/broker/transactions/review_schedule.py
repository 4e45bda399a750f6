"""When each open transaction is next reviewed (reviewer.py asks its producer's side).

A record persists its next review as a wall-clock time (what is reported and what a
restart keeps); the decision is taken on the monotonic clock (kshim/broker/clock.py), so
a wall-clock step neither times every open transaction out at once nor puts one off.
"""

from __future__ import annotations

from kshim.broker.clock import BrokerClock
from kshim.broker.transactions.transaction_states import TransactionState
from kshim.storage.meta.transaction_store import TransactionRecord


class ReviewSchedule:
    def __init__(self, clock: BrokerClock) -> None:
        self._clock = clock
        # Per open transaction: its persisted next_review_ms and when that review is due
        # on the monotonic clock.
        self._due: dict[str, tuple[int, int]] = {}

    def schedule(self, record: TransactionRecord, delay_ms: int) -> None:
        """The transaction is to be reviewed ``delay_ms`` from now; the caller holds its
        lock and persists it."""
        record.next_review_ms = self._clock() + delay_ms
        self._due[record.transactional_id] = (
            record.next_review_ms,
            self._clock.monotonic() + delay_ms,
        )

    def due(self, record: TransactionRecord) -> bool:
        """Whether the transaction is Ongoing and its review time has come."""
        if record.state != TransactionState.ONGOING or record.next_review_ms < 0:
            return False
        return self._clock.monotonic() >= self._deadline(record)

    def forget(self, transactional_id: str) -> None:
        """The transaction ended or its id expired: nothing left to review."""
        self._due.pop(transactional_id, None)

    def _deadline(self, record: TransactionRecord) -> int:
        """When the review is due on the monotonic clock: as scheduled in this process,
        else (loaded at start) from the persisted wall times, the only ones a restart
        keeps. The wait is then at most the one the record had when last persisted, so
        a clock stepped back (before or during the stop) never lengthens a timeout; one
        stepped forward during the stop looks like downtime, and Kafka too then reviews
        at once."""
        noted = self._due.get(record.transactional_id)
        if noted is not None and noted[0] == record.next_review_ms:
            return noted[1]
        left = min(record.next_review_ms - self._clock(),
                   record.next_review_ms - record.updated_ms)  # fmt: skip
        due = self._clock.monotonic() + max(left, 0)
        self._due[record.transactional_id] = (record.next_review_ms, due)
        return due
