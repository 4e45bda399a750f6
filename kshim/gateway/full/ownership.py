"""Which gateway owns each partition of the cluster's full-data views (docs/full-data-view.md).

The gateways are members of one upstream consumer group over the views' placeholder topics
``T.full`` (empty, with ``T``'s partitions), as the delayed delivery's gateways are over
``T.delay`` (kshim/gateway/delay/dispatcher.py). The group's leader gives each partition to
one gateway and every member learns the whole map (owners_assignor.py), so that each
gateway's Metadata answers name the owner of every ``T.full`` partition. Nothing is fetched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.client import AIOKafkaClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.structs import TopicPartition

from kshim.broker.full_view.naming import source_name, view_name
from kshim.gateway.delay.upstream import Upstream
from kshim.gateway.full.owners_assignor import (
    OwnersAssignor,
    ViewOwner,
    decode_owners,
    is_view_topic,
    owner_at,
)

log = logging.getLogger(__name__)

DEFAULT_GROUP = "kshim-gateway-full"
VIEW_TOPIC_PATTERN = r"^[^_].*\.full$"  # a T.full; X.full.full and X.delay.full filtered later
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37  # another gateway added them first
POLL_MS = 500
METADATA_TRIES = 50
METADATA_RETRY_S = 0.1

Callback = Callable[[str, int], Awaitable[None]]
Change = Literal["released", "owned", "retry"]

__all__ = ["ViewOwner", "ViewOwnership", "ViewSettings"]


@dataclass(frozen=True, slots=True)
class ViewSettings:
    """How the gateways share the cluster's ``T.full`` partitions."""

    group_id: str = DEFAULT_GROUP
    topics: tuple[str, ...] = ()  # the T.full topics to share; () for every one (a pattern)
    replication: int = 0  # of a T.full created here; 0: three, or every broker if fewer
    session_timeout_ms: int = 10_000  # how soon a dead gateway's partitions move
    heartbeat_interval_ms: int = 3_000  # how soon a member hears of a rebalance
    metadata_max_age_ms: int = 30_000  # how soon a new T.full placeholder is seen
    retry_s: float = 1.0  # after the cluster refuses, or on_owned raises
    stop_timeout_s: float = 10.0  # leaving the group, then the last on_released calls


class ViewOwnership:
    """This gateway's membership of the group sharing the cluster's ``T.full`` partitions,
    and the owner of each of them. ``address`` is this gateway's advertised host and
    bootstrap port, where clients are sent for the partitions it owns.

    ``on_owned(T, p)`` and ``on_released(T, p)`` (the source topic, not ``T.full``) are
    awaited one at a time, in order, outside the group's own work (a slow one never delays
    a heartbeat): at each rebalance, the partitions this gateway lost are released before
    those it gained are owned, and one it keeps is neither. Kafka's eager rebalance revokes
    everything before the new assignment, so a partition moving from A to B is released by
    A when A hears of the new assignment, about when B owns it. An ``on_owned`` that raises
    is called again every ``retry_s`` while the partition stays owned; ``on_released``
    follows it either way. Runs on the event loop that calls ``start``."""

    def __init__(
        self,
        upstream: Upstream,
        address: tuple[str, int],
        on_owned: Callback,
        on_released: Callback,
        settings: ViewSettings | None = None,
    ) -> None:
        self.upstream = upstream
        self.settings = settings or ViewSettings()
        self._me = owner_at(*address)
        self._assignor = OwnersAssignor(self._me, self._learned)
        self._callbacks = {"owned": on_owned, "released": on_released, "retry": on_owned}
        self._owners: Mapping[tuple[str, int], ViewOwner] = MappingProxyType({})
        self._owned: frozenset[TopicPartition] = frozenset()
        self._failed: set[TopicPartition] = set()  # on_owned raised: called again
        self._retries: dict[TopicPartition, asyncio.TimerHandle] = {}
        self._changes: asyncio.Queue[tuple[Change, TopicPartition]] = asyncio.Queue()
        # aiokafka's clients are made on the loop that runs them, in start.
        self._consumer: AIOKafkaConsumer | None = None
        self._client: AIOKafkaClient | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # The partition count of each T.full this gateway has ensured (ensure_view_topic).
        self.partition_counts: dict[str, int] = {}

    @property
    def me(self) -> ViewOwner:
        return self._me

    def owner(self, view_topic: str, partition: int) -> ViewOwner | None:
        """The gateway owning ``view_topic`` (``T.full``) partition ``partition`` at the last
        rebalance this gateway heard of, or None while unknown."""
        return self._owners.get((view_topic, partition))

    def owners(self) -> Mapping[tuple[str, int], ViewOwner]:
        """(``T.full``, partition) -> owner at the last rebalance; a snapshot (read-only)."""
        return self._owners

    async def start(self) -> None:
        """Joins the group (its first assignment comes in the background); raises
        KafkaError (aiokafka's) when the cluster cannot be reached, its clients stopped."""
        settings = self.settings
        options = self.upstream.options()
        self._client = AIOKafkaClient(**options)
        self._admin = AIOKafkaAdminClient(**options)
        self._consumer = AIOKafkaConsumer(
            group_id=settings.group_id,
            enable_auto_commit=False,
            partition_assignment_strategy=(self._assignor,),
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            metadata_max_age_ms=settings.metadata_max_age_ms,
            **options,
        )
        try:
            await self._client.bootstrap()
            await self._admin.start()
            await self._consumer.start()
        except BaseException:
            await self._stop_clients()
            raise
        # Always a pattern, an explicit list as one too: with a pattern the consumer asks
        # for every topic's metadata, while naming a missing topic in a Metadata request
        # has a cluster with auto.create.topics.enable create it, with the wrong partitions.
        names = settings.topics
        pattern = f"^(?:{'|'.join(map(re.escape, names))})$" if names else VIEW_TOPIC_PATTERN
        self._consumer.subscribe(pattern=pattern)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._poll()), loop.create_task(self._call_back())]

    async def stop(self) -> None:
        """Leaves the group (the others share its partitions at once), calls on_released
        for each partition it owned, stops its clients; each of the three bounded by
        ``stop_timeout_s``."""
        poll, call_back = self._tasks or (None, None)
        self._tasks = []
        await _cancelled(poll)
        if self._consumer is not None:  # its stop is the LeaveGroup
            await self._bounded(self._consumer.stop(), "leaving the group")
        self._owners = MappingProxyType({})
        for handle in self._retries.values():
            handle.cancel()
        self._failed.clear()
        self._changed(frozenset())
        if call_back is not None:
            await self._bounded(self._changes.join(), "the last on_released calls")
        await _cancelled(call_back)
        await self._bounded(self._stop_clients(), "stopping the clients")
        self._consumer = self._admin = self._client = None

    async def _bounded(self, work: Awaitable[object], what: str) -> None:
        try:
            await asyncio.wait_for(work, self.settings.stop_timeout_s)
        except Exception:
            log.warning("%s failed or timed out", what, exc_info=True)

    async def _stop_clients(self) -> None:
        stopping = [self._consumer.stop()] if self._consumer is not None else []
        stopping += [client.close() for client in (self._admin, self._client) if client]
        for failed in await asyncio.gather(*stopping, return_exceptions=True):
            if isinstance(failed, BaseException):
                log.warning("cannot stop a client: %r", failed)

    async def _poll(self) -> None:
        """Polls for ever, every partition paused: the placeholders hold nothing to read,
        yet a consumer that does not poll within max.poll.interval.ms leaves its group
        (KIP-62). The heartbeats are aiokafka's own background work."""
        assert self._consumer is not None
        while True:
            try:
                await self._consumer.getmany(timeout_ms=POLL_MS)
            except Exception:  # the group's or the cluster's trouble: aiokafka retries
                log.warning("the view owners' group cannot poll now", exc_info=True)
                await asyncio.sleep(self.settings.retry_s)

    def _learned(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        """The leader's assignment: this gateway's partitions (paused at once: nothing of
        them is ever fetched) and every partition's owner."""
        assigned = assignment.partitions()
        if assigned and self._consumer is not None:
            self._consumer.pause(*assigned)
        mine = frozenset(tp for tp in assigned if is_view_topic(tp.topic))
        try:
            owners = decode_owners(assignment.user_data)
        except (ValueError, KeyError, TypeError):
            log.warning("the leader sent no owners map; only this gateway's known", exc_info=True)
            owners = {}
        owners.update({(tp.topic, tp.partition): self._me for tp in mine})
        self._owners = MappingProxyType(owners)
        self._assignor.owned = mine
        self._changed(mine)

    def _changed(self, mine: frozenset[TopicPartition]) -> None:
        released, owned = sorted(self._owned - mine), sorted(mine - self._owned)
        for tp in released:
            self._changes.put_nowait(("released", tp))
        for tp in owned:
            self._changes.put_nowait(("owned", tp))
        self._owned = mine
        if released or owned:
            log.info("view partitions released %s, owned %s", _names(released), _names(owned))

    async def _call_back(self) -> None:
        while True:
            change, tp = await self._changes.get()
            try:
                await self._call(change, tp)
            finally:
                self._changes.task_done()

    async def _call(self, change: Change, tp: TopicPartition) -> None:
        if change == "retry" and (tp not in self._failed or tp not in self._owned):
            return  # released meanwhile, or owned again and called since
        if change == "released":
            self._failed.discard(tp)
        source = source_name(tp.topic)
        assert source is not None  # only views are owned
        try:
            await self._callbacks[change](source, tp.partition)
        except Exception:
            called = "on_released" if change == "released" else "on_owned"
            log.exception("%s(%s, %d) failed", called, source, tp.partition)
            if change != "released":
                self._failed.add(tp)
                retry: tuple[Change, TopicPartition] = ("retry", tp)
                loop = asyncio.get_running_loop()
                self._retries[tp] = loop.call_later(
                    self.settings.retry_s, self._changes.put_nowait, retry
                )
        else:
            if change != "released":
                self._failed.discard(tp)

    async def ensure_view_topic(self, topic: str) -> bool:
        """Creates ``topic``'s placeholder ``T.full`` upstream, with ``topic``'s partitions,
        or adds those it lacks (Kafka's group coordinator refuses OffsetCommit for a topic
        it does not have, so consumers of T.full need it). Returns False when ``topic``
        does not exist or can have no view. Raises KafkaError (aiokafka's) or RuntimeError
        when the cluster refuses; only between start and stop."""
        view = view_name(topic)
        if not is_view_topic(view):
            return False
        partitions, view_partitions, brokers = await self._partition_counts(topic, view)
        if partitions is None:
            return False
        self.partition_counts[view] = partitions
        if view_partitions is None:
            await self._create_view(view, partitions, brokers)
        elif view_partitions < partitions:
            await self._grow_view(view, partitions)
        else:
            return True
        await self._visible(topic, view, partitions)
        if self._consumer is not None:
            # The pattern is matched again at the next metadata update: now, rather than
            # at the end of metadata_max_age_ms, so the new view's partitions get owners.
            await self._consumer._client.force_metadata_update()
        return True

    async def _visible(self, topic: str, view: str, partitions: int) -> None:
        """Waits, a few seconds at most, until the cluster's metadata shows ``view`` with
        ``partitions``: Kafka's controller creates a topic, its brokers learn of it a moment
        later, and a client sent to it at once would hear that it does not exist."""
        for _ in range(METADATA_TRIES):
            with contextlib.suppress(RuntimeError):  # its leader still being elected
                _, count, _ = await self._partition_counts(topic, view)
                if count is not None and count >= partitions:
                    return
            await asyncio.sleep(METADATA_RETRY_S)
        log.warning("%s not in the cluster's metadata yet", view)

    async def _partition_counts(self, topic: str, view: str) -> tuple[int | None, int | None, int]:
        """How many partitions ``topic`` and ``view`` have (None: missing), and how many
        brokers the cluster has. Asked without auto-creation, which admin.describe_topics
        would allow: the cluster must not create ``topic`` or ``view`` for asking."""
        if self._client is None:
            raise RuntimeError("ensure_view_topic needs start")
        request = MetadataRequest([topic, view], allow_auto_topic_creation=False)
        answer = (await self._client.send(self._client.get_random_node(), request)).to_object()
        counts: dict[str, int | None] = {}
        for described in answer["topics"]:
            code = described["error_code"]
            if code not in (0, UNKNOWN_TOPIC_OR_PARTITION):
                raise RuntimeError(f"cannot describe {described['topic']}: error {code}")
            counts[described["topic"]] = len(described["partitions"]) if code == 0 else None
        return counts.get(topic), counts.get(view), len(answer["brokers"])

    async def _create_view(self, view: str, partitions: int, brokers: int) -> None:
        assert self._admin is not None
        replication = self.settings.replication or min(3, brokers)
        response = await self._admin.create_topics([NewTopic(view, partitions, replication)])
        for name, code, *message in response.topic_errors:
            if code not in (0, TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"cannot create {name}: error {code} {message}")

    async def _grow_view(self, view: str, partitions: int) -> None:
        assert self._admin is not None
        response = await self._admin.create_partitions({view: NewPartitions(partitions)})
        for name, code, message in response.topic_errors:
            if code not in (0, INVALID_PARTITIONS):
                raise RuntimeError(f"cannot add partitions to {name}: error {code} {message}")


def _names(partitions: list[TopicPartition]) -> list[str]:
    return [f"{tp.topic}-{tp.partition}" for tp in partitions]


async def _cancelled(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
