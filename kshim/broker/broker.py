"""The broker: its configuration, stores and services (topics and what names mean, their
Metadata entries kept encoded, groups, transactions and their review, the full-data view,
idempotence state).

Handlers receive this object and return responses; they never touch sockets. Starting
the background jobs (``jobs/``) and stopping them in order is ``lifecycle.py``'s.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
from collections.abc import Callable

from kshim.broker.alarms.checks import RecentRounds
from kshim.broker.alarms.registry import Alarms
from kshim.broker.alarms.webhook import Webhook, WebhookSettings
from kshim.broker.append_waiters import AppendWaiters
from kshim.broker.clock import BrokerClock, as_broker_clock
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.delay.naming import reserved_for_delay
from kshim.broker.delay.service import DelaySchedule
from kshim.broker.endpoints import Endpoints
from kshim.broker.fetch_sessions import FetchSessionCache
from kshim.broker.full_view.applier import build_view
from kshim.broker.full_view.view import FullView
from kshim.broker.full_view.worker import ProcessApplier, ThreadApplier
from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.settings import GroupSettings
from kshim.broker.partitions.service import PartitionService
from kshim.broker.producer_state import PartitionProducerState
from kshim.broker.refusal_log import RefusalLog
from kshim.broker.security.acls.service import Acls
from kshim.broker.security.credentials import Credentials
from kshim.broker.topic_descriptions import TopicDescriptions
from kshim.broker.topic_resolver import TopicResolver
from kshim.broker.topics import Topic, TopicManager
from kshim.broker.traffic import TopicTraffic
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.broker.transactions.review_hooks import load_review_hook
from kshim.broker.transactions.reviewer import TransactionReviewer
from kshim.broker.transactions.settings import review_settings, transaction_settings
from kshim.protocol.record_batch import BatchHeader
from kshim.storage.files.data_directory_lock import DataDirectoryLock
from kshim.storage.files.filesystem import FileSystem
from kshim.storage.interface import LogStore, PartitionLog, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.meta.committed_offsets import CommittedOffset
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.transaction_store import TransactionRecord
from kshim.storage.schedule.delay_store import DelayStore
from kshim.storage.views.full_view_store import FullViewStore


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        clock: Callable[[], int] | None = None,
        filesystem: FileSystem | None = None,
        logs: LogStore | None = None,
    ) -> None:
        """A broker on ``config.data_dir``: its logs on disk through ``filesystem`` (the
        real one by default) unless another ``logs`` store is given (tests pass the
        in-memory one, storage/log/memory_log.py); metadata, groups and transactions in LMDB
        there either way. ``clock``: the real clocks by default (kshim/broker/clock.py
        says which reads what); a test's fake is read as wall and monotonic time alike."""
        self.config = config
        self.clock: BrokerClock = BrokerClock() if clock is None else as_broker_clock(clock)
        data_dir = config.data_dir
        os.makedirs(data_dir, exist_ok=True)
        # Before anything in the directory is opened: a second broker must change nothing.
        self.data_dir_lock = DataDirectoryLock.acquire(data_dir)
        try:
            self._open_stores(data_dir, self.clock, filesystem, logs)
        except BaseException:
            self.data_dir_lock.release()
            raise

    def _open_stores(
        self,
        data_dir: str,
        clock: BrokerClock,
        filesystem: FileSystem | None,
        logs: LogStore | None,
    ) -> None:
        config = self.config
        self.metadata = MetadataStore(os.path.join(data_dir, "meta"))
        self.logs = (
            logs
            if logs is not None
            else DiskLogStore(data_dir, clock, filesystem, config.store_settings())
        )
        self.endpoints = Endpoints(config)
        # Who may connect (SASL users' credentials) and what they may do (ACLs), both kept
        # with the metadata.
        self.credentials = Credentials(self.metadata.scram, config)
        self.acls = Acls(self.metadata.acls, config)
        self.append_waiters = AppendWaiters()
        # Incremental fetch sessions (KIP-227), in memory: a restart forgets them all. Their
        # eviction goes by idle time, a duration: on the monotonic clock.
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots"), clock.monotonic
        )
        self.full_view = self._open_full_view(os.path.join(data_dir, "full_view"))
        self.traffic = TopicTraffic()  # records and bytes in and out per topic (the metrics)
        self.refusals = RefusalLog(clock.monotonic)  # refusal reasons, rate-limited
        self._open_alarms()
        # Opened lazily: a broker nobody delays anything on has no delays/ directory.
        self.delays = DelaySchedule(
            DelayStore(os.path.join(data_dir, "delays"), filesystem=filesystem),
            config.get_int("kshim.delay.max.ms"),
        )
        self._open_services(clock)

    def _open_alarms(self) -> None:
        self.webhook = alarm_webhook(self.config)
        self.alarms = Alarms(None if self.webhook is None else self.webhook.notify)
        self.flush_rounds = RecentRounds()  # for the alarm on slow group-commit rounds
        if isinstance(self.logs, DiskLogStore):
            self.logs.observe_rounds(self.flush_rounds.add)

    def _open_services(self, clock: BrokerClock) -> None:
        """Topics and what their names mean, the group and transaction coordinators, and the
        review of transactions, over the stores opened before."""
        config = self.config
        self.topics = TopicManager(
            config, self.metadata, self.logs, self._prepare_partition, self._watch_partition
        )
        self.groups = GroupCoordinator(
            GroupSettings.from_config(config), clock, self.metadata.committed_offsets
        )
        self.topics.config_listeners.append(self._configs_changed)
        self.transactions = TransactionCoordinator(
            self.metadata, self.topics.log, clock, transaction_settings(config)
        )
        self.transactions.on_complete.append(self._apply_transaction_offsets)
        self.resolver = TopicResolver(self.topics, self.transactions, self.full_view, self.delays)
        self.partitions = PartitionService(
            self.resolver,
            self.topics,
            self.transactions,
            self.groups,
            clock,
            self.traffic,
            self.refusals,
        )
        self.topic_descriptions = TopicDescriptions(self.resolver, self.topics)
        self.reviewer = TransactionReviewer(
            self.transactions,
            load_review_hook(config.values["kshim.review.hook"]),
            review_settings(config),
            self.alarms,
        )

    def _open_full_view(self, directory: str) -> FullView:
        store = FullViewStore(directory)
        in_process = self.config.values["kshim.full.view.process"] == "false"
        applier = (
            ThreadApplier(store) if in_process else ProcessApplier(directory, self.config.data_dir)
        )
        # Views cost nothing until read, unless the operator asked for them all up front.
        eager = "kshim.full.view" in self.config.explicit and self.config.get_bool(
            "kshim.full.view"
        )
        view = FullView(store, applier, eager)
        view.builder = functools.partial(build_view, self)
        return view

    async def start(self) -> None:
        """Loads every topic and recovers its logs, then the committed offsets.

        Python's cyclic garbage collector waits meanwhile: loading thousands of topics
        makes hundreds of thousands of objects that live as long as the broker, and the
        full collections their creation would trigger cost more than the loading itself.
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            await self.full_view.load()
            await self.topics.load()
            await self.groups.load()
            await self.transactions.load()
        finally:
            if collecting:
                gc.enable()

    def _prepare_partition(self, topic_partition: TopicPartition) -> Callable[[BatchHeader], None]:
        producers = PartitionProducerState()
        self.partitions.producer_states[topic_partition] = producers
        transactions = self.transactions.partition_states.recovery_callback(topic_partition)

        def replay(header: BatchHeader) -> None:
            producers.recover(header)
            transactions(header)

        return replay

    async def _apply_transaction_offsets(self, record: TransactionRecord, committed: bool) -> None:
        """TxnOffsetCommit offsets become the group's committed offsets on commit."""
        if not committed:
            return
        by_group: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        for group, topic, partition, offset, leader_epoch, metadata in record.pending_offsets:
            by_group.setdefault(group, {})[TopicPartition(topic, partition)] = CommittedOffset(
                offset, leader_epoch, metadata, self.clock()
            )
        for group, offsets in by_group.items():
            await self.groups.offsets.commit(group, offsets)
        record.pending_offsets = []

    def _watch_partition(self, log: PartitionLog) -> None:
        topic_partition = log.topic_partition
        log.listeners.append(lambda: self.append_waiters.notify(topic_partition))
        log.listeners.append(lambda: self._notify_view(topic_partition))
        if reserved_for_delay(topic_partition.topic):
            log.listeners.append(lambda: self.delays.notify(topic_partition))

    def _configs_changed(self, topic: Topic) -> None:
        # A view just turned on has no append to wake its applier.
        if self.full_view.keeps(topic):
            for log in topic.logs:
                self.full_view.notify(log.topic_partition)

    def _notify_view(self, topic_partition: TopicPartition) -> None:
        # Only topics with a view wake the applier: the others would wake it for nothing on
        # every flush round.
        if self.resolver.keeps_view(topic_partition.topic):
            self.full_view.notify(topic_partition)

    def expire_idle_producers(self) -> int:
        """Applies producer.id.expiration.ms to every partition's idempotence state."""
        cutoff = self.clock.expiry_now() - self.config.get_int("producer.id.expiration.ms")
        return self.partitions.expire_idle_producers(cutoff)

    async def close(self) -> None:
        try:
            await self.logs.close()
            self.metadata.close()
            await asyncio.to_thread(self.full_view.applier.close)
            self.full_view.store.close()
            self.delays.close()
        finally:
            self.data_dir_lock.release()


def alarm_webhook(config: BrokerConfig) -> Webhook | None:
    """The receiver of ``kshim.alarm.webhook``, or None when none is set."""
    url = config.values["kshim.alarm.webhook"]
    if not url:
        return None
    return Webhook(
        WebhookSettings(
            url,
            config.get_int("kshim.alarm.webhook.timeout.ms") / 1000,
            config.get_int("kshim.alarm.webhook.retries"),
        )
    )
