"""Reviewing transactions left open on the Kafka cluster behind a gateway.

kshim's broker asks a review hook how an overdue transaction ends (VENUS's half messages,
RocketMQ's "transaction check": broker/transactions/reviewer.py) instead of aborting it at
its timeout, as Kafka does. A gateway does the same for the cluster behind it, without
seeing the producers' traffic: the cluster itself says which transactions are open and since
when (ListTransactions and DescribeTransactions, KIP-664), so any gateway can review any
transaction, whichever gateway its producer used, or none.

A transaction is first reviewed once it has been open for ``first_share`` of its
``transaction.timeout.ms`` (Kafka aborts it at the whole), then every ``retry_ms`` while
the hook answers ``unknown``. ``commit`` or ``abort`` is carried out at the transaction's
coordinator with the producer id and epoch the coordinator described (EndTxn, as the
producer would send it): the coordinator decides the outcome once, so a producer's late
EndTxn the other way, or a second gateway's decision, is refused (INVALID_TXN_STATE). A
transaction still undecided when no review can come before its timeout raises the alarm
``transaction_undecided``: Kafka will abort it.

Several gateways given a review hook share the transactions among them (review_share.py):
each reviews the transactional ids of its share, so that the hook is asked about each
transaction by one of them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka.errors import KafkaError

from kshim.broker.alarms.registry import Alarms
from kshim.broker.transactions.review_hooks import ABORT, COMMIT, ReviewHook, ReviewRequest
from kshim.client.sasl import AuthenticationFailed
from kshim.client.topic_admin import AdminError
from kshim.client.transaction_admin import TransactionAdmin
from kshim.client.transaction_descriptions import TransactionDescription
from kshim.gateway.review_share import ReviewShare

log = logging.getLogger(__name__)
UNDECIDED = "transaction_undecided"  # the broker's alarm, for the same condition
ONGOING = "Ongoing"
DEFAULT_RETRY_MS = 5_000


@dataclass(frozen=True, slots=True)
class GatewayReviewSettings:
    first_share: float = 0.5  # of the transaction's timeout, before the first review
    retry_ms: int = DEFAULT_RETRY_MS  # between reviews answered ``unknown``
    check_interval_ms: int = 1_000  # between looks at the cluster's open transactions


# A transaction under review: the same id, producer id, epoch and start is the same one.
Identity = tuple[str, int, int, int]


@dataclass(slots=True)
class _Reviewing:
    reviews: int = 0
    next_ms: int = 0


@dataclass
class GatewayReviewer:
    """Reviews the cluster's open transactions through ``connect()`` (a TransactionAdmin
    to the upstream cluster, used from one worker thread at a time); with a ``share``, only
    the transactional ids of this gateway's share, every one without."""

    connect: Callable[[], TransactionAdmin]
    hook: ReviewHook
    settings: GatewayReviewSettings = field(default_factory=GatewayReviewSettings)
    alarms: Alarms = field(default_factory=Alarms)
    clock_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    share: ReviewShare | None = None
    _reviewing: dict[Identity, _Reviewing] = field(default_factory=dict)

    async def run(self) -> None:
        """Reviews until cancelled; a pass that fails (the cluster unreachable) is logged
        and the next one tried. With a share, joins the reviewing gateways first (tried
        again until the cluster answers) and leaves them when cancelled."""
        if self.share is not None:
            await self._join(self.share)
        try:
            while True:
                try:
                    await self.review_pass()
                except (AdminError, OSError, AuthenticationFailed) as error:
                    log.warning("cannot review the cluster's transactions now: %s", error)
                await asyncio.sleep(self.settings.check_interval_ms / 1000)
        finally:
            if self.share is not None:
                await self.share.stop()

    async def _join(self, share: ReviewShare) -> None:
        while True:
            try:
                await share.start()
                return
            except (KafkaError, RuntimeError, OSError) as error:
                log.warning("cannot join the reviewing gateways now: %s", error)
                await share.stop()
            await asyncio.sleep(self.settings.check_interval_ms / 1000)

    async def review_pass(self) -> int:
        """Reviews every open transaction due; returns how many were decided."""
        open_now = await asyncio.to_thread(self._open_transactions)
        self._forget_all_but({_identity(found) for found in open_now})
        decided = 0
        for found in open_now:
            if await self._review_if_due(found):
                decided += 1
        return decided

    def _open_transactions(self) -> list[TransactionDescription]:
        share = self.share
        admin = self.connect()
        try:
            listed = admin.list_transactions([ONGOING])
            ids = {found.transactional_id for found in listed}
            if share is not None:
                ids = {
                    transactional_id for transactional_id in ids if share.reviews(transactional_id)
                }
            described = admin.describe_transactions(ids)
        finally:
            admin.close()
        return [
            found
            for found in described.values()
            if found is not None and found.state == ONGOING and found.start_time_ms is not None
        ]

    def _forget_all_but(self, still_open: set[Identity]) -> None:
        for identity in set(self._reviewing) - still_open:
            del self._reviewing[identity]

    async def _review_if_due(self, found: TransactionDescription) -> bool:
        assert found.start_time_ms is not None
        now = self.clock_ms()
        first_ms = found.start_time_ms + int(found.timeout_ms * self.settings.first_share)
        state = self._reviewing.setdefault(_identity(found), _Reviewing(next_ms=first_ms))
        if now < state.next_ms:
            return False
        decision = await self.hook(_request(found, state.reviews))
        if decision not in (COMMIT, ABORT):
            self.outcomes["unknown"] += 1
            state.reviews += 1
            state.next_ms = now + self.settings.retry_ms
            deadline = found.start_time_ms + found.timeout_ms
            self.alarms.check(
                UNDECIDED, found.transactional_id, state.reviews, 0,
                f"transaction {found.transactional_id} undecided after {state.reviews} "
                "reviews; the cluster aborts it at its timeout",
                holds=state.next_ms >= deadline,
            )  # fmt: skip
            return False
        await asyncio.to_thread(self._end, found, decision == COMMIT)
        self.outcomes[decision] += 1
        self.alarms.release(UNDECIDED, found.transactional_id, 0)
        log.info("review of %s on the cluster: %s", found.transactional_id, decision)
        return True

    def _end(self, found: TransactionDescription, commit: bool) -> None:
        admin = self.connect()
        try:
            admin.end_transaction(found, commit)
        finally:
            admin.close()


def _identity(found: TransactionDescription) -> Identity:
    return (found.transactional_id, found.producer_id, found.producer_epoch,
            found.start_time_ms or 0)  # fmt: skip


def _request(found: TransactionDescription, reviews: int) -> ReviewRequest:
    """What the hook is told, as the broker tells it; the offsets written are not known
    here (the cluster's partitions hold them), so they are -1."""
    return {
        "transactional_id": found.transactional_id,
        "producer_id": found.producer_id,
        "producer_epoch": found.producer_epoch,
        "started_ms": found.start_time_ms,
        "reviews": reviews,
        "reason": "timeout",
        "partitions": [
            {"topic": topic, "partition": partition, "first_offset": -1, "last_offset": -1}
            for topic, partition in found.partitions
        ],
    }
