"""The gateways' delayed delivery: each a member of one upstream consumer group over the
cluster's ``*.delay`` topics, delivering the partitions the group gives it (owned.py) and
taking over those of a gateway that dies (takeover.py). Kafka's group protocol moves a
dead member's partitions once its session.timeout.ms passes without a heartbeat."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from kshim.broker.delay.naming import target_of
from kshim.gateway.delay.entries import schedule_partition
from kshim.gateway.delay.figures import DeliveryFigures
from kshim.gateway.delay.owned import OwnedPartition
from kshim.gateway.delay.takeover import read_schedule
from kshim.gateway.delay.upstream import DELAY_TOPIC_PATTERN, DelaySettings, Upstream
from kshim.gateway.upstream_topics import ensure_topic

log = logging.getLogger(__name__)
POLL_MS = 500
RETRY_S = 1.0


class DelayDispatcher:
    """Delivers the records of the cluster at ``upstream``'s ``T.delay`` topics to ``T`` when
    due. Runs on the event loop that calls ``start``."""

    def __init__(self, upstream: Upstream, settings: DelaySettings | None = None) -> None:
        self.upstream = upstream
        self.settings = settings or DelaySettings()
        self.owned: dict[TopicPartition, OwnedPartition] = {}
        self.figures = DeliveryFigures()
        self._schedule_partitions = 0
        # aiokafka's clients are made on the loop that runs them, in start.
        self._consumer: AIOKafkaConsumer
        self._reader: AIOKafkaConsumer
        self._watermarks: AIOKafkaConsumer
        self._takeover_lock = asyncio.Lock()
        self._running: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()

    def _new_consumer(self, **options: object) -> AIOKafkaConsumer:
        settings = self.settings
        if "group_id" in options:
            options.update(
                isolation_level="read_committed",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=settings.session_timeout_ms,
                heartbeat_interval_ms=settings.heartbeat_interval_ms,
                metadata_max_age_ms=settings.metadata_max_age_ms,
            )
        return AIOKafkaConsumer(**options, **self.upstream.options())

    async def start(self) -> None:
        """Creates the schedule topic if missing and joins the group; raises KafkaError
        (aiokafka's) or RuntimeError when the cluster refuses, its clients stopped."""
        self._consumer = self._new_consumer(group_id=self.settings.group_id)
        self._reader = self._new_consumer(isolation_level="read_committed")
        self._watermarks = self._new_consumer(isolation_level="read_uncommitted")
        try:
            await self._start()
        except BaseException:
            await self._stop_clients()
            raise

    async def _start(self) -> None:
        await self._reader.start()
        await self._watermarks.start()
        self._schedule_partitions = await self._schedule_topic()
        await self._consumer.start()
        listener = _Listener(self)
        if self.settings.topics:
            self._consumer.subscribe(list(self.settings.topics), listener=listener)
        else:
            self._consumer.subscribe(pattern=DELAY_TOPIC_PATTERN, listener=listener)
        self._running = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Leaves the group (its partitions move at once) and stops every client."""
        for task in [self._running, *self._background]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._stop_clients()

    async def _stop_clients(self) -> None:
        for consumer in (self._consumer, self._reader, self._watermarks):
            await consumer.stop()  # the group's first: it leaves, its partitions move now
        await self.release(list(self.owned))

    async def _schedule_topic(self) -> int:
        """Creates the schedule topic if missing; returns its number of partitions."""
        settings = self.settings
        admin = AIOKafkaAdminClient(**self.upstream.options())
        await admin.start()
        try:
            return await ensure_topic(
                admin,
                settings.schedule_topic,
                settings.schedule_partitions,
                settings.schedule_replication,
                {"cleanup.policy": "compact"},
            )
        finally:
            await admin.close()

    async def _run(self) -> None:
        while True:
            try:
                batches = await self._consumer.getmany(timeout_ms=POLL_MS)
            except KafkaError:  # the group's or the cluster's trouble: aiokafka retries
                log.warning("cannot read the delay topics now", exc_info=True)
                await asyncio.sleep(RETRY_S)
                continue
            filing = [
                self.owned[tp].file(records) for tp, records in batches.items() if tp in self.owned
            ]
            await asyncio.gather(*filing)

    def assigned(self, assigned: list[TopicPartition]) -> None:
        """The group gave this gateway ``assigned``: its ``T.delay`` partitions are paused
        (nothing of them is fetched) and taken over in the background, so that the group
        consumer's heartbeats go on meanwhile: a rebalance callback that outlasts the
        session timeout gets the member thrown out of the group."""
        sources = [tp for tp in assigned if target_of(tp.topic) and tp not in self.owned]
        if sources:
            self._consumer.pause(*sources)
            self._in_background(self.take_over(sources))

    async def revoked(self, revoked: list[TopicPartition]) -> None:
        """The group takes ``revoked`` away (in Kafka's eager protocol, every partition at
        each rebalance): takeovers under way stop, owned partitions close."""
        background = list(self._background)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await self.release(revoked)

    async def take_over(self, sources: list[TopicPartition]) -> None:
        """Owns ``sources`` (paused): fences, reads the schedule, seeks to the group offset,
        resumes. Tried again in a second when the cluster refuses."""
        async with self._takeover_lock:
            assignment = self._consumer.assignment()
            sources = [tp for tp in sources if tp in assignment and tp not in self.owned]
            if not sources:
                return
            fresh = {tp: self._owned_partition(tp) for tp in sources}
            try:
                positions = await self._fence_and_read(fresh)
            except BaseException as error:
                await asyncio.gather(
                    *(owned.producer.stop() for owned in fresh.values()), return_exceptions=True
                )
                if not isinstance(error, Exception):
                    raise  # cancelled: the partitions were revoked
                log.warning("cannot take %s over now", sources, exc_info=True)
                self._in_background(self._retake(sources, RETRY_S))
                return
            for tp, owned in fresh.items():  # no await from here on: revoked is not called
                self._consumer.seek(tp, positions[tp])
                owned.next_offset = positions[tp]
                owned.start()
                self.owned[tp] = owned
            self._consumer.resume(*sources)
        log.info("delivering the delayed records of %s", sorted(map(str, sources)))

    def _owned_partition(self, tp: TopicPartition) -> OwnedPartition:
        target = target_of(tp.topic)
        producer = self.upstream.transactional_producer(
            f"{self.settings.transactional_id_prefix}{target}-{tp.partition}"
        )
        partition = schedule_partition(tp.topic, tp.partition, self._schedule_partitions)
        return OwnedPartition(tp, producer, partition, self.settings, self.broken, self.figures)

    async def _fence_and_read(
        self, fresh: dict[TopicPartition, OwnedPartition]
    ) -> dict[TopicPartition, int]:
        """Fences the last owners, reads the schedule; returns where each partition's
        filing starts: its group offset, read after the fencing, or its log start."""
        await asyncio.gather(*(owned.producer.start() for owned in fresh.values()))
        by_source = {(tp.topic, tp.partition): owned for tp, owned in fresh.items()}
        topic = self.settings.schedule_topic
        schedule = {TopicPartition(topic, o.schedule_partition) for o in fresh.values()}
        await read_schedule(
            self._reader, self._watermarks, schedule, by_source, self.settings.takeover_timeout_s
        )
        starts = await self._watermarks.beginning_offsets(list(fresh))
        positions = {}
        for tp in fresh:
            committed = await self._consumer.committed(tp)
            positions[tp] = starts[tp] if committed is None else committed
        return positions

    async def release(self, revoked: list[TopicPartition]) -> None:
        """Stops owning ``revoked``; a transaction under way ends first."""
        closing = [self.owned.pop(tp) for tp in revoked if tp in self.owned]
        await asyncio.gather(*(owned.close() for owned in closing))

    def broken(self, tp: TopicPartition) -> None:
        """A transaction of ``tp`` failed: it is closed and, a second later (a cause that
        lasts, such as ``T`` missing, is not retried in a loop), taken over again (fencing
        this gateway's own last producer for it) if the group still gives it to this one."""
        if tp in self._consumer.assignment():
            self._consumer.pause(tp)
        self._in_background(self._retake([tp], RETRY_S))

    async def _retake(self, sources: list[TopicPartition], delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        await self.release(sources)
        await self.take_over(sources)

    def _in_background(self, work: Coroutine[object, None, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, dispatcher: DelayDispatcher) -> None:
        self._dispatcher = dispatcher

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._dispatcher.revoked(list(revoked))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._dispatcher.assigned(list(assigned))
