"""What a topic name means, and what may be done with it: the one place that knows
special topics.

A name is either a stored topic ``T`` (its partition logs: read and write),
the full-data view ``T.full`` of a stored topic whose ``kshim.full.view`` is
on (read-only: the latest committed record of every key, at its original
offset; ``full_view/``), or nothing. Handlers ask here and get a
``ResolvedTopic`` whose partitions offer only what that kind of topic allows;
they never look at a name's suffix themselves (docs/architecture.md).

Only stored topics are listed (``listed``, Metadata for all topics); a view is answered
when asked for by name. Pattern subscriptions match the all-topics answer, so a view
listed there would be matched by ``T.*`` along with ``T`` and its records read twice
(handlers/metadata.py says why the views are left out rather than marked internal).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from kshim.broker.full_view import naming
from kshim.broker.full_view.partition import ViewPartition
from kshim.broker.full_view.view import FullView
from kshim.broker.partition_reads import LogPartition, ReadablePartition
from kshim.broker.topics import INVALID_TOPIC, Topic, TopicError, TopicManager
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import PartitionLog, TopicPartition

# A view's topic id is uuid5(its topic's id, this): stable, and distinct from every topic's.
VIEW_ID_NAME = "kshim.full.view"
# The id of no topic (Kafka's Uuid.ZERO_UUID): answered where a topic has no id to give.
NO_TOPIC_ID = uuid.UUID(int=0)


class TopicKind(enum.Enum):
    LOG = "log"  # a stored topic: produce, fetch, configure, delete
    VIEW = "view"  # a full-data view: fetch and describe only


@dataclass(frozen=True, slots=True)
class TopicConfigs:
    values: dict[str, str]  # every effective config
    overridden: frozenset[str]  # the names set on the topic rather than by broker defaults
    read_only: bool

    def overrides(self) -> dict[str, str]:
        """The configs set on the topic itself (what AlterConfigs replaces)."""
        return {name: self.values[name] for name in self.overridden}


@dataclass(frozen=True, slots=True)
class ResolvedTopic:
    name: str
    kind: TopicKind
    stored: Topic  # the topic itself, or the topic a view is built from

    @property
    def partition_count(self) -> int:
        return self.stored.record.partitions

    @property
    def topic_id(self) -> uuid.UUID:
        stored_id = uuid.UUID(bytes=self.stored.record.topic_id)
        return uuid.uuid5(stored_id, VIEW_ID_NAME) if self.kind is TopicKind.VIEW else stored_id

    @property
    def writable(self) -> bool:
        return self.kind is TopicKind.LOG

    def has_partition(self, index: int) -> bool:
        return 0 <= index < self.partition_count

    def configs(self) -> TopicConfigs:
        """A view is its topic's data compacted: its topic's settings, every one read-only,
        and no view of its own."""
        values, overridden = self.stored.configs, frozenset(self.stored.record.configs)
        if self.kind is TopicKind.LOG:
            return TopicConfigs(values, overridden, read_only=False)
        view_values = {**values, "cleanup.policy": "compact", naming.VIEW_CONFIG: "false"}
        view_overridden = overridden | {"cleanup.policy", naming.VIEW_CONFIG}
        return TopicConfigs(view_values, view_overridden, read_only=True)

    def refuse_change(self, instead: str, code: ErrorCode = ErrorCode.policy_violation) -> None:
        """Raises TopicError(``code``) unless the topic may be changed (written, configured,
        deleted, truncated); ``instead`` says what to do instead."""
        if not self.writable:
            raise TopicError(code, f"{self.name} is a read-only full-data view; {instead}")

    def refuse_deletion(self) -> None:
        """Raises TopicError(POLICY_VIOLATION) unless DeleteTopics may delete the topic: a
        view goes only with its topic."""
        if not self.writable:
            raise TopicError(
                ErrorCode.policy_violation,
                f"{self.name} is a full-data view; delete its topic instead",
            )


@dataclass(frozen=True, slots=True)
class WritablePartition:
    log: PartitionLog
    topic: Topic  # its configs say what the log accepts


@dataclass(frozen=True, slots=True)
class DeletablePartition:
    """A stored topic's partition whose oldest records retention and DeleteRecords delete.

    A topic's full-data view is built from its log, so the log start never passes what
    the view has applied: a record deleted first would be missing from the view for good.
    """

    log: PartitionLog
    topic: Topic  # its configs say what retention keeps
    view: FullView | None  # the topic's view, which holds the log start back; None without one

    async def log_start_limit(self) -> int | None:
        """The offset the log start must not pass now (the view's applied position), or
        None when nothing holds it back."""
        if self.view is None:
            return None
        return await self.view.applied_position(self.log.topic_partition)


class TopicResolver:
    """Resolves names against the stored topics; event-loop thread only."""

    def __init__(
        self, topics: TopicManager, transactions: TransactionCoordinator, full_view: FullView
    ) -> None:
        self._topics = topics
        self._transactions = transactions
        self._full_view = full_view

    def resolve(self, name: str) -> ResolvedTopic | None:
        """The topic or view called ``name``, or None."""
        topic = self._topics.get(name)
        if topic is not None:
            return ResolvedTopic(name, TopicKind.LOG, topic)
        source = naming.source_of(self._topics.by_name, name)
        if source is not None:
            return ResolvedTopic(name, TopicKind.VIEW, source)
        return None

    def resolve_id(self, topic_id: uuid.UUID) -> ResolvedTopic | None:
        """The stored topic with this id, or None (views are never addressed by id)."""
        for topic in self._topics.by_name.values():
            if topic.record.topic_id == topic_id.bytes:
                return ResolvedTopic(topic.record.name, TopicKind.LOG, topic)
        return None

    def listed(self) -> Iterator[ResolvedTopic]:
        """Every stored topic (Metadata for all topics). Views, and any other kind of topic
        derived from a stored one, are left out: they resolve only by name (module
        docstring)."""
        for topic in list(self._topics.by_name.values()):
            yield ResolvedTopic(topic.record.name, TopicKind.LOG, topic)

    def may_create(self, name: str) -> bool:
        """False for a name no topic may take: ``X.full`` is reserved for the view of a
        topic ``X``."""
        return not naming.reserved_for_view(name)

    def refuse_creation(self, name: str) -> None:
        """Raises TopicError(INVALID_TOPIC) when ``may_create(name)`` is False."""
        if not self.may_create(name):
            raise TopicError(
                INVALID_TOPIC,
                f"names ending in {naming.VIEW_SUFFIX!r} are reserved for full-data views",
            )

    def readable_partition(self, topic_partition: TopicPartition) -> ReadablePartition | None:
        """The partition Fetch and ListOffsets read, or None when there is no such partition."""
        resolved = self._owner(topic_partition)
        if resolved is None:
            return None
        source_log = resolved.stored.logs[topic_partition.partition]
        if resolved.kind is TopicKind.VIEW:
            return ViewPartition(self._full_view, topic_partition, source_log.topic_partition)
        transactions = self._transactions.partition(topic_partition)
        return LogPartition(source_log, transactions)

    def writable_partition(self, topic_partition: TopicPartition) -> WritablePartition | None:
        """The log Produce appends to; None when there is no such partition. Raises
        TopicError(INVALID_REQUEST) for a partition of a read-only topic, as Kafka refuses
        a produce request a topic cannot take."""
        resolved = self._owner(topic_partition)
        if resolved is None:
            return None
        resolved.refuse_change("produce to its topic instead", ErrorCode.invalid_request)
        return WritablePartition(resolved.stored.logs[topic_partition.partition], resolved.stored)

    def is_writable(self, topic_partition: TopicPartition) -> bool:
        """True when Produce could write to the partition: it exists, and its topic is not a
        read-only view (what AddPartitionsToTxn and DescribeProducers accept)."""
        resolved = self._owner(topic_partition)
        return resolved is not None and resolved.writable

    def deletable_partition(self, topic_partition: TopicPartition) -> DeletablePartition | None:
        """The partition DeleteRecords deletes from; None when there is no such partition.
        Raises TopicError(POLICY_VIOLATION) for any partition of a view: views are
        read-only."""
        resolved = self.resolve(topic_partition.topic)
        if resolved is None:
            return None
        resolved.refuse_change("delete records of its topic instead")
        if not resolved.has_partition(topic_partition.partition):
            return None
        return self._deletable(resolved.stored, topic_partition.partition)

    def _owner(self, topic_partition: TopicPartition) -> ResolvedTopic | None:
        """The topic holding the partition, or None when there is no such partition."""
        resolved = self.resolve(topic_partition.topic)
        if resolved is None or not resolved.has_partition(topic_partition.partition):
            return None
        return resolved

    def deletable_partitions(self) -> list[DeletablePartition]:
        """Every partition of every stored topic, as they are now (retention's pass)."""
        return [
            self._deletable(topic, index)
            for topic in list(self._topics.by_name.values())
            for index in range(len(topic.logs))
        ]

    def _deletable(self, topic: Topic, index: int) -> DeletablePartition:
        view = self._full_view if self._full_view.keeps(topic) else None
        return DeletablePartition(topic.logs[index], topic, view)

    async def forget_view(self, topic: str) -> None:
        """Deletes the view data of the deleted topic ``topic``: a view goes with its topic
        (nothing to do for a topic without one)."""
        await self._full_view.forget_topic(topic)

    def derived_names(self, topic: str) -> list[str]:
        """The names that belong to the stored topic ``topic`` and go when it goes: its
        view's name, whether or not the view is on now (no topic can take that name, so
        offsets committed under it were committed on the view)."""
        return [naming.view_name(topic)] if naming.may_have_view(topic) else []

    def keeps_view(self, topic: str) -> bool:
        """True when the stored topic ``topic`` keeps its full-data view current (which must
        then see every append, and hold back retention until it has applied what goes):
        a view set on explicitly, or read once (full_view/view.py)."""
        stored = self._topics.get(topic)
        return stored is not None and self._full_view.keeps(stored)
