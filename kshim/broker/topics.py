"""Topic lifecycle: create, delete, add partitions, alter configs; durable in LMDB.

Each topic's record (id, partition count, config overrides) lives in the
metadata store; its partitions' logs live in the log store. Metadata writes
run in a worker thread so the event loop never waits on LMDB's fsync.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.keys import TOPIC_CONFIGS
from kshim.broker.config.validators import ConfigError, refusal
from kshim.protocol.record_batch import BatchHeader
from kshim.storage.interface import (
    LogConfig,
    LogStore,
    PartitionLog,
    PartitionToOpen,
    TopicPartition,
)
from kshim.storage.meta.metadata import MetadataStore, TopicRecord

LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class TopicError(Exception):
    """A topic request Kafka would refuse; ``code`` is the Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def no_topic_to_configure(name: str) -> TopicError:
    """The refusal to change the configs of ``name``, which no topic has, in Kafka's words
    (ZkAdminManager's, which Kafka 3.9 in KRaft mode answers too)."""
    return TopicError(UNKNOWN_TOPIC, f"The topic '{name}' does not exist.")


UNKNOWN_SERVER_ERROR = -1
TOPIC_ALREADY_EXISTS = 36
INVALID_TOPIC = 17
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
UNKNOWN_TOPIC = 3
# Kafka's KRaft controller writes the records of one admin request in one batch of at most
# this many (QuorumController.MAX_RECORDS_PER_USER_OP): a topic record per topic created, a
# partition record per partition, a config record per config set.
MAX_RECORDS_PER_REQUEST = 10_000


class PastOneBatch(TopicError):
    """Partitions to add that do not fit in what is left of the request's controller
    batch. Kafka's controller meets its full record list (BoundedList) as an unexpected
    error there: CreatePartitions answers UNKNOWN_SERVER_ERROR, whose message Kafka never
    sends (ApiError.fromThrowable)."""

    def __init__(self, added: int, room: int) -> None:
        super().__init__(UNKNOWN_SERVER_ERROR, f"{added} partition(s) to add, room for {room}")


@dataclass(slots=True)
class Topic:
    record: TopicRecord
    configs: dict[str, str]  # effective: broker defaults overlaid with the topic's overrides
    logs: list[PartitionLog]


def validate_topic_name(name: str) -> None:
    """Raises TopicError(INVALID_TOPIC) for a name Kafka would refuse."""
    if name in (".", "..") or not LEGAL_TOPIC_NAME.match(name):
        raise TopicError(INVALID_TOPIC, f"illegal topic name {name!r}")


def validate_topic_configs(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Returns the validated overrides; raises TopicError(INVALID_CONFIG) in Kafka's words
    (ControllerConfigurationValidator, then LogConfig.validate): every null value, else the
    first unknown name, else the first value refused in the order of TOPIC_CONFIGS (Kafka's
    LogConfig's), whatever the request's order."""
    nulls = [name for name, value in overrides.items() if value is None]
    if nulls:
        names = ",".join(nulls)
        raise TopicError(INVALID_CONFIG, f"Null value not supported for topic configs: {names}")
    unknown = next((name for name in overrides if name not in TOPIC_CONFIGS), None)
    if unknown is not None:
        raise TopicError(INVALID_CONFIG, f"Unknown topic config name: {unknown}")
    checked = {}
    for name, spec in TOPIC_CONFIGS.items():
        value = overrides.get(name)
        if value is None:
            continue
        try:
            checked[name] = spec.validate(value)
        except ConfigError as error:
            raise TopicError(INVALID_CONFIG, refusal(name, error)) from None
    return {name: checked[name] for name in overrides}  # in the order given


def _refuse_no_increase(name: str, current: int, total: int) -> None:
    """Raises TopicError(INVALID_PARTITIONS) unless ``total`` is more than ``current``, in
    the words of Kafka's ReplicationControlManager.createPartitions."""
    if total == current:
        raise TopicError(INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if total < current:
        raise TopicError(
            INVALID_PARTITIONS,
            f"The topic {name} currently has {current} partition(s); {total} would not be "
            "an increase.",
        )


def _refuse_placement(assignments: Sequence[Sequence[int]], added: int, node_id: int) -> None:
    """Raises TopicError(INVALID_REPLICA_ASSIGNMENT) unless there is one assignment per new
    partition, each naming this broker, the only one registered, once (Kafka's
    ReplicationControlManager.validateManualPartitionAssignment, in its words)."""
    if len(assignments) != added:
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
            "assignment(s) were specified.",
        )
    placement = "The manual partition assignment includes"
    for replicas in assignments:
        if not replicas:
            raise TopicError(INVALID_REPLICA_ASSIGNMENT, f"{placement} an empty replica list.")
        previous = None
        for broker_id in sorted(replicas):
            if broker_id != node_id:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"{placement} broker {broker_id}, but no such broker is registered.",
                )
            if broker_id == previous:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"{placement} the broker {broker_id} more than once.",
                )
            previous = broker_id


class TopicManager:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataStore,
        logs: LogStore,
        on_open: Callable[[TopicPartition], Callable[[BatchHeader], None]],
        on_opened: Callable[[PartitionLog], None],
    ) -> None:
        self._config = config
        self._metadata = metadata
        self._logs = logs
        self._on_open = on_open  # gives the recovery callback for a partition
        self._on_opened = on_opened  # sees every log once it is open
        self.config_listeners: list[Callable[[Topic], None]] = []  # called after a change
        self._by_name: dict[str, Topic] = {}
        self._lock = asyncio.Lock()
        # Shared by every topic without overrides: thousands of topics, one copy.
        self._defaults = config.topic_defaults()
        self._default_log_config = config.log_config(self._defaults)

    async def load(self) -> None:
        """Opens every stored topic's logs, recovering them all in one pass of the store."""
        records = await asyncio.to_thread(self._metadata.topics)
        log_starts = await asyncio.to_thread(self._metadata.log_start_offsets)
        topics = [(record, self.effective_configs(record.configs)) for record in records.values()]
        partitions = [
            PartitionToOpen(
                TopicPartition(record.name, index),
                self._log_config(configs),
                log_starts.get(TopicPartition(record.name, index), 0),
                self._on_open(TopicPartition(record.name, index)),
            )
            for record, configs in topics
            for index in range(record.partitions)
        ]
        logs = iter(await self._logs.recover(partitions))
        for record, configs in topics:
            topic_logs = [next(logs) for _ in range(record.partitions)]
            for log in topic_logs:
                self._on_opened(log)
            self._by_name[record.name] = Topic(record, configs, topic_logs)

    @property
    def by_name(self) -> Mapping[str, Topic]:
        """Every stored topic by name (read-only; change topics through the methods)."""
        return self._by_name

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def log(self, topic_partition: TopicPartition) -> PartitionLog | None:
        """The partition's log, or None when the topic or the partition does not exist."""
        topic = self._by_name.get(topic_partition.topic)
        if topic is None or not 0 <= topic_partition.partition < len(topic.logs):
            return None
        return topic.logs[topic_partition.partition]

    def effective_configs(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """The broker defaults overlaid with ``overrides`` (the shared defaults themselves
        when there are none: never change the dict returned)."""
        return {**self._defaults, **overrides} if overrides else self._defaults

    def _log_config(self, configs: dict[str, str]) -> LogConfig:
        if configs is self._defaults:
            return self._default_log_config
        return self._config.log_config(configs)

    async def _open(self, record: TopicRecord) -> Topic:
        configs = self.effective_configs(record.configs)
        logs = [
            await self._open_partition(record.name, index, configs)
            for index in range(record.partitions)
        ]
        return Topic(record, configs, logs)

    async def _open_partition(
        self, topic: str, index: int, configs: dict[str, str]
    ) -> PartitionLog:
        topic_partition = TopicPartition(topic, index)
        log_start = await asyncio.to_thread(self._metadata.log_start_offset, topic_partition)
        log = await self._logs.open(
            topic_partition,
            self._log_config(configs),
            log_start,
            self._on_open(topic_partition),
        )
        self._on_opened(log)
        return log

    async def create(
        self,
        name: str,
        partitions: int,
        overrides: Mapping[str, str | None],
        validate_only: bool = False,
    ) -> Topic | None:
        """Creates a topic; raises TopicError. Returns None when ``validate_only``."""
        validate_topic_name(name)
        if partitions < 1:
            raise TopicError(INVALID_PARTITIONS, "number of partitions must be at least 1")
        checked = validate_topic_configs(overrides)
        async with self._lock:
            if name in self._by_name:
                # Kafka's words (ReplicationControlManager.createTopic)
                raise TopicError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            if validate_only:
                return None
            record = TopicRecord(name, uuid.uuid4().bytes, partitions, checked)
            await asyncio.to_thread(self._metadata.put_topic, record)
            topic = await self._open(record)
            self._by_name[name] = topic
            return topic

    async def delete(self, name: str) -> None:
        """Deletes the topic, its metadata and its files; raises TopicError if unknown."""
        async with self._lock:
            topic = self._by_name.pop(name, None)
            if topic is None:
                raise TopicError(UNKNOWN_TOPIC, f"unknown topic {name!r}")
            await asyncio.to_thread(self._metadata.delete_topic, name)
            for log in topic.logs:
                await self._logs.delete(log.topic_partition)

    async def add_partitions(
        self,
        name: str,
        total: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
        room: int = MAX_RECORDS_PER_REQUEST,
    ) -> int:
        """Grows the topic to ``total`` partitions, placed as ``assignments`` say when
        given (one list of broker ids per new partition); returns how many it adds (or
        would add). Raises TopicError, PastOneBatch when that is more than ``room``, after
        the checks of the count and the placement, as Kafka's controller refuses."""
        async with self._lock:
            topic = self._by_name.get(name)
            if topic is None:
                raise TopicError(UNKNOWN_TOPIC, f"unknown topic {name!r}")
            current = topic.record.partitions
            _refuse_no_increase(name, current, total)
            if assignments is not None:
                _refuse_placement(assignments, total - current, self._config.node_id)
            if total - current > room:
                raise PastOneBatch(total - current, room)
            if validate_only:
                return total - current
            record = TopicRecord(name, topic.record.topic_id, total, topic.record.configs)
            await asyncio.to_thread(self._metadata.put_topic, record)
            for index in range(current, total):
                topic.logs.append(await self._open_partition(name, index, topic.configs))
            topic.record = record
            return total - current

    async def set_configs(
        self, name: str, overrides: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """Replaces the topic's overrides with ``overrides``; raises TopicError (an invalid
        or null value is INVALID_CONFIG, found before the topic is looked up)."""
        checked = validate_topic_configs(overrides)
        async with self._lock:
            topic = self._by_name.get(name)
            if topic is None:
                raise no_topic_to_configure(name)
            if validate_only:
                return
            record = TopicRecord(name, topic.record.topic_id, topic.record.partitions, checked)
            await asyncio.to_thread(self._metadata.put_topic, record)
            topic.record = record
            topic.configs = self.effective_configs(checked)
            log_config = self._log_config(topic.configs)
            for log in topic.logs:
                log.config = log_config
        for listener in self.config_listeners:
            listener(topic)
