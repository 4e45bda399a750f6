"""Which of the cluster's open transactions this gateway reviews, when several are given a
review hook (review.py).

The reviewing gateways are members of one upstream consumer group over a placeholder topic
(``kshim-gateway-reviews``, empty), as the delivering gateways share the ``T.delay``
partitions (delay/dispatcher.py): Kafka's group protocol gives each of its partitions to one
live member and moves a dead member's once its session times out. A transactional id
belongs to one partition by a hash of its bytes, as Kafka's transaction coordinator places
an id on a partition of ``__transaction_state`` (TransactionStateManager.partitionFor), and
each gateway reviews only the ids of the partitions it holds: the hook is asked about a
transaction by one gateway, except for the moment a partition moves (the coordinator still
decides each transaction once, review.py). Nothing is ever fetched from the placeholder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from kshim.gateway.delay.upstream import Upstream
from kshim.gateway.upstream_topics import ensure_topic

log = logging.getLogger(__name__)
DEFAULT_GROUP = "kshim-gateway-reviews"
POLL_MS = 500
RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class ReviewShareSettings:
    """How the reviewing gateways share the cluster's transactional ids."""

    group_id: str = DEFAULT_GROUP
    topic: str = DEFAULT_GROUP  # the placeholder, created if missing
    partitions: int = 16  # of a placeholder created here: the most gateways sharing
    replication: int = 0  # 0: three, or every broker of a smaller cluster
    session_timeout_ms: int = 10_000  # how soon a dead gateway's ids move
    heartbeat_interval_ms: int = 3_000


def share_of(transactional_id: str, partitions: int) -> int:
    """The placeholder partition ``transactional_id`` belongs to; the same on every gateway
    (crc32 of its UTF-8 bytes: Python's own ``hash`` differs from process to process)."""
    return zlib.crc32(transactional_id.encode()) % partitions


class ReviewShare:
    """This gateway's membership of the reviewing gateways' group. Runs on the event loop
    that calls ``start``."""

    def __init__(self, upstream: Upstream, settings: ReviewShareSettings | None = None) -> None:
        self.upstream = upstream
        self.settings = settings or ReviewShareSettings()
        self.partitions = 0  # the placeholder's, known after start
        self.held: frozenset[int] = frozenset()  # the partitions this gateway holds now
        self._consumer: AIOKafkaConsumer | None = None
        self._polling: asyncio.Task[None] | None = None

    def reviews(self, transactional_id: str) -> bool:
        """Whether this gateway reviews ``transactional_id`` now (none before its first
        assignment, none while a rebalance moves the partitions)."""
        held = self.held
        return bool(held) and share_of(transactional_id, self.partitions) in held

    async def start(self) -> None:
        """Creates the placeholder if missing and joins the group (its first assignment
        comes in the background); raises KafkaError (aiokafka's) or RuntimeError when the
        cluster refuses, its clients stopped."""
        settings = self.settings
        admin = AIOKafkaAdminClient(**self.upstream.options())
        await admin.start()
        try:
            self.partitions = await ensure_topic(
                admin, settings.topic, settings.partitions, settings.replication
            )
        finally:
            await admin.close()
        consumer = AIOKafkaConsumer(
            group_id=settings.group_id,
            enable_auto_commit=False,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            **self.upstream.options(),
        )
        await consumer.start()
        consumer.subscribe([settings.topic], listener=_Listener(self, consumer))
        self._consumer = consumer
        self._polling = asyncio.get_running_loop().create_task(self._poll(consumer))

    async def stop(self) -> None:
        """Leaves the group: the others share this gateway's partitions at once."""
        if self._polling is not None:
            self._polling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._polling
            self._polling = None
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
        self.held = frozenset()

    async def _poll(self, consumer: AIOKafkaConsumer) -> None:
        """Polls for ever, every partition paused: a member that does not poll within
        max.poll.interval.ms leaves its group (KIP-62), and rebalances are joined in poll.
        The heartbeats are aiokafka's own background work."""
        while True:
            try:
                await consumer.getmany(timeout_ms=POLL_MS)
            except KafkaError:  # the group's or the cluster's trouble: aiokafka retries
                log.warning("the reviewing gateways' group cannot poll now", exc_info=True)
                await asyncio.sleep(RETRY_S)

    def changed(self, held: frozenset[int]) -> None:
        if held != self.held:
            log.info("reviewing the transactional ids of partitions %s", sorted(held))
        self.held = held


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, share: ReviewShare, consumer: AIOKafkaConsumer) -> None:
        self._share = share
        self._consumer = consumer

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._share.changed(frozenset())

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            self._consumer.pause(*assigned)
        self._share.changed(frozenset(tp.partition for tp in assigned))
