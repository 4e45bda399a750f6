"""Reviewing half messages: transactions left open past their timeout.

kshim's defaults (RocketMQ checks after 6 s, every 30 s, 15 times): the first
review when the transaction has been open for its ``transaction.timeout.ms``
(the client's setting, 60 s by default), then every ``kshim.review.retry.ms``
(30 s) while the hook answers ``unknown``, at most ``kshim.review.max.checks``
(15) times; then the broker aborts and raises an alarm (an ERROR log line and
the ``alarms`` counter). Without a hook a timed-out transaction is aborted,
as Kafka does. A decision bumps the producer epoch first, so a late EndTxn
from the old instance is fenced and cannot change the outcome. The same
review decides an open transaction when a new instance of the producer calls
InitProducerId.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass

from kshim.broker.alarms.registry import Alarms
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.broker.transactions.review_hooks import ABORT, COMMIT, ReviewHook, ReviewRequest
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import TransactionRecord

log = logging.getLogger(__name__)
UNDECIDED = "transaction_undecided"  # the alarm: the review's last check could not decide


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    retry_ms: int = 30_000  # kshim.review.retry.ms
    max_reviews: int = 15  # kshim.review.max.checks
    check_interval_ms: int = 1_000  # kshim.review.check.interval.ms


class TransactionReviewer:
    def __init__(
        self,
        coordinator: TransactionCoordinator,
        hook: ReviewHook | None,
        settings: ReviewSettings,
        alarms: Alarms | None = None,
    ) -> None:
        self._coordinator = coordinator
        self.hook = hook
        self.settings = settings
        self._alarms = Alarms() if alarms is None else alarms
        # Reviews by outcome (commit, abort, unknown: asked again later), for the metrics.
        self.outcomes: collections.Counter[str] = collections.Counter()

    def review_request(self, record: TransactionRecord, reason: str) -> ReviewRequest:
        """What the hook is told: who, which epoch, and the offsets written per partition."""
        partitions = []
        for topic, index in record.partitions:
            state = self._coordinator.partition(TopicPartition(topic, index))
            written = state.open.get(record.producer_id)
            partitions.append({
                "topic": topic,
                "partition": index,
                "first_offset": written.first_offset if written else -1,
                "last_offset": written.last_offset if written else -1,
            })  # fmt: skip
        return {
            "transactional_id": record.transactional_id,
            "producer_id": record.producer_id,
            "producer_epoch": record.producer_epoch,
            "started_ms": record.started_ms,
            "reviews": record.reviews,
            "reason": reason,
            "partitions": partitions,
        }

    async def resolve(self, record: TransactionRecord, reason: str) -> bool:
        """Decides an open transaction (the caller holds its lock); False if still undecided."""
        decision = (
            ABORT if self.hook is None else await self.hook(self.review_request(record, reason))
        )
        self.outcomes[decision if decision in (COMMIT, ABORT) else "unknown"] += 1
        if decision not in (COMMIT, ABORT):
            record.reviews += 1
            if record.reviews < self.settings.max_reviews:
                self._coordinator.reviews.schedule(record, self.settings.retry_ms)
                await self._coordinator.persist(record)
                return False
            self._alarms.happened(
                UNDECIDED, record.transactional_id, record.reviews, self.settings.max_reviews,
                f"transaction {record.transactional_id} undecided after {record.reviews} "
                "reviews; aborting it",
            )  # fmt: skip
            decision = ABORT
        log.info("review of %s (%s): %s", record.transactional_id, reason, decision)
        await self._coordinator.new_epoch(record)
        await self._coordinator.end(record, decision == COMMIT)
        return True

    async def review_due(self) -> int:
        """Reviews every open transaction whose review time has come; returns how many."""
        reviewed = 0
        for record in list(self._coordinator.records.values()):
            if not self._due(record):
                continue
            async with self._coordinator.lock(record.transactional_id):
                if self._due(record):
                    await self.resolve(record, "timeout")
                    reviewed += 1
        return reviewed

    def _due(self, record: TransactionRecord) -> bool:
        # On the monotonic clock (review_schedule.py): a wall-clock step
        # forward must not review every open transaction at once.
        return self._coordinator.reviews.due(record)

    async def review_pass(self) -> None:
        """One pass of the background job (every ``settings.check_interval_ms``): the due
        transactions reviewed, then idle transactional ids expired."""
        await self.review_due()
        await self._coordinator.expire_idle()
