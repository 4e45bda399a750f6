"""What a topic name means, and what may be done with it: the one place that knows
special topics.

A name is either a stored topic ``T`` (its partition logs: read and write),
the full-data view ``T.full`` of a stored topic whose ``kshim.full.view`` is
on (read-only: the latest committed record of every key, at its original
offset; ``full_view/``), the delay companion ``T.delay`` of a stored topic
(write-only: its records appear in ``T`` when due; ``delay/``, stored as a
topic of its own, created when first named, and with ``T`` when auto-creation
creates it for a producer naming ``T.delay``), or nothing. Handlers ask here and get a
``ResolvedTopic`` whose partitions offer only what that kind of topic allows;
they never look at a name's suffix themselves (docs/architecture.md).

Only stored topics are listed (``listed``, Metadata for all topics); a view or a delay
companion is answered when asked for by name. Pattern subscriptions match the all-topics
answer, so a view listed there would be matched by ``T.*`` along with ``T`` and its records
read twice (api/records/metadata.py says why the views are left out rather than marked internal).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kshim.broker.compacted_records import compacts, keyless_refusal
from kshim.broker.config.topic_configs import TopicConfigs
from kshim.broker.delay import naming as delay_naming
from kshim.broker.delay.requests import check_batch
from kshim.broker.delay.service import DelaySchedule
from kshim.broker.full_view import naming
from kshim.broker.full_view.partition import ViewPartition
from kshim.broker.full_view.view import FullView
from kshim.broker.partition_reads import LogPartition, ReadablePartition
from kshim.broker.topics import Topic, TopicError, TopicManager
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import PartitionLog, TopicPartition

# A view's topic id is uuid5(its topic's id, this): stable, and distinct from every topic's.
VIEW_ID_NAME = "kshim.full.view"
# The id of no topic (Kafka's Uuid.ZERO_UUID): answered where a topic has no id to give.
NO_TOPIC_ID = uuid.UUID(int=0)


def base_topic(name: str) -> str:
    """The stored topic a name belongs to, read from the name alone: ``T`` for the view
    ``T.full`` and for the delay companion ``T.delay``, the name itself otherwise; whether
    or not any of them exists. Access to a special topic is decided by its base topic's
    ACLs (api/access/permissions.py), so an operator writes ACLs for ``T`` only."""
    source = naming.source_name(name)
    if source is not None:
        return source
    target = delay_naming.target_of(name)
    return name if target is None else target


class TopicKind(enum.Enum):
    LOG = "log"  # a stored topic: produce, fetch, configure, delete
    VIEW = "view"  # a full-data view: fetch and describe only
    DELAY = "delay"  # a delay companion: produce and describe only


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
        """Whether Produce may write to it."""
        return self.kind is not TopicKind.VIEW

    def has_partition(self, index: int) -> bool:
        return 0 <= index < self.partition_count

    def configs(self) -> TopicConfigs:
        """A view is its topic's data compacted: its topic's settings, every one read-only,
        and no view of its own."""
        values, overridden = self.stored.configs, frozenset(self.stored.record.configs)
        if self.kind is not TopicKind.VIEW:
            return TopicConfigs(values, overridden, read_only=self.kind is TopicKind.DELAY)
        view_values = {**values, "cleanup.policy": "compact", naming.VIEW_CONFIG: "false"}
        view_overridden = overridden | {"cleanup.policy", naming.VIEW_CONFIG}
        return TopicConfigs(view_values, view_overridden, read_only=True)

    def refuse_change(self, instead: str, code: ErrorCode = ErrorCode.policy_violation) -> None:
        """Raises TopicError(``code``) unless the topic may be changed (configured,
        deleted, truncated); ``instead`` says what to do instead."""
        if self.kind is not TopicKind.LOG:
            raise TopicError(code, f"{self.name} is {self._what()}; {instead}")

    def refuse_deletion(self) -> None:
        """Raises TopicError(POLICY_VIOLATION) unless DeleteTopics may delete the topic: a
        view or a delay companion goes only with its topic."""
        self.refuse_change("delete its topic instead")

    def _what(self) -> str:
        if self.kind is TopicKind.VIEW:
            return "a read-only full-data view"
        return f"the write-only delay companion of {self.stored_name}"

    @property
    def stored_name(self) -> str:
        """The stored topic whose records the name shows or delays."""
        return base_topic(self.name)


@dataclass(frozen=True, slots=True)
class WritablePartition:
    log: PartitionLog
    topic: Topic  # its configs say what the log accepts
    # Why a batch may not be written beyond the log's own checks, or None (a delay
    # companion's records must say when they are due): (batch, now ms) -> refusal.
    check: Callable[[memoryview, int], str | None] | None = None


@dataclass(frozen=True, slots=True)
class DeletablePartition:
    """A stored topic's partition whose oldest records retention and DeleteRecords delete.

    A topic's full-data view is built from its log, so the log start never passes what
    the view has applied: a record deleted first would be missing from the view for good.
    """

    log: PartitionLog
    topic: Topic  # its configs say what retention keeps
    view: FullView | None  # the topic's view, which holds the log start back; None without one
    # For a delay companion: its schedule, which must have read a record before it goes.
    delays: DelaySchedule | None = None

    async def log_start_limit(self) -> int | None:
        """The offset the log start must not pass now (the view's applied position, or
        what the delay schedule has read), or None when nothing holds it back."""
        if self.delays is not None:
            return await self.delays.position(self.log.topic_partition)
        if self.view is None:
            return None
        return await self.view.applied_position(self.log.topic_partition)


@dataclass(eq=False, slots=True)
class TopicResolver:
    """Resolves names against the stored topics; event-loop thread only."""

    topics: TopicManager
    transactions: TransactionCoordinator
    full_view: FullView
    delays: DelaySchedule

    def resolve(self, name: str) -> ResolvedTopic | None:
        """The topic or view called ``name``, or None."""
        topic = self.topics.get(name)
        if topic is not None:
            delayed = delay_naming.reserved_for_delay(name)
            return ResolvedTopic(name, TopicKind.DELAY if delayed else TopicKind.LOG, topic)
        source = naming.source_of(self.topics.by_name, name)
        if source is not None:
            return ResolvedTopic(name, TopicKind.VIEW, source)
        return None

    def resolve_id(self, topic_id: uuid.UUID) -> ResolvedTopic | None:
        """The stored topic with this id, or None (views are never addressed by id)."""
        for topic in self.topics.by_name.values():
            if topic.record.topic_id == topic_id.bytes:
                return ResolvedTopic(topic.record.name, TopicKind.LOG, topic)
        return None

    def listed(self) -> Iterator[ResolvedTopic]:
        """Every stored topic (Metadata for all topics). Views, and any other kind of topic
        derived from a stored one, are left out: they resolve only by name (module
        docstring)."""
        for name, topic in list(self.topics.by_name.items()):
            if not delay_naming.reserved_for_delay(name):
                yield ResolvedTopic(name, TopicKind.LOG, topic)

    async def create_companion(self, name: str) -> ResolvedTopic | None:
        """The delay companion ``name`` (``T.delay``), created now with ``T``'s partition
        count if ``T`` exists and it does not; None when ``name`` is no companion's."""
        target = delay_naming.target_of(name)
        stored = None if target is None else self.topics.get(target)
        if stored is None:
            return None
        if self.topics.get(name) is None:
            try:  # never a view of its own: its records are not T's until delivered
                await self.topics.create(
                    name, stored.record.partitions, {naming.VIEW_CONFIG: "false"}
                )
            except TopicError as error:
                if error.code != ErrorCode.topic_already_exists:
                    raise
        return self.resolve(name)

    def may_create(self, name: str) -> bool:
        """Whether auto-creating ``name`` (``auto_create``) creates a stored topic, which
        then needs what creating any topic needs (CREATE, where ACLs apply). False for a
        view's name ``X.full`` (reserved), and for a delay companion's ``T.delay`` whose
        ``T`` exists (the companion is created when first named, without it). True for
        ``T.delay`` of no ``T`` that may be created: naming it creates ``T``."""
        if naming.reserved_for_view(name):
            return False
        target = delay_naming.target_of(name)
        if target is None:
            return True
        return self.topics.get(target) is None and self.may_create(target)

    async def auto_create(self, name: str, partitions: int) -> ResolvedTopic | None:
        """The topic ``name``, auto-created (Metadata, with auto-creation on): as Kafka
        creates any topic so, with ``partitions`` partitions and the broker's defaults. For
        a delay companion ``T.delay`` of no ``T``, that is ``T``, and the companion with
        it, so that a producer to ``T.delay`` proceeds whether or not ``T`` existed. None
        when ``may_create(name)`` is False. Raises TopicError (never for a topic created
        meanwhile)."""
        if not self.may_create(name):
            return None
        stored = delay_naming.target_of(name) or name
        try:
            await self.topics.create(stored, partitions, {})
        except TopicError as error:
            if error.code != ErrorCode.topic_already_exists:
                raise
        return self.resolve(name) if stored == name else await self.create_companion(name)

    def refuse_unknown(self, name: str) -> None:
        """Raises TopicError(UNKNOWN_TOPIC_OR_PARTITION), Kafka's answer for a topic that
        does not exist, with the reason when a user would not guess it: ``T.delay`` of no
        ``T``. Returns for any other name that resolves to nothing."""
        target = delay_naming.target_of(name)
        if target is not None and self.resolve(target) is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                f"create {target} first: {name} delays records for {target}, which does not exist",
            )

    def refuse_creation(self, name: str) -> None:
        """Raises TopicError(POLICY_VIOLATION) for a reserved name: ``X.full``, or ``X.delay``
        (whether or not ``X`` exists: CreateTopics never makes a companion).

        The names are legal in Kafka; kshim's rule refuses them, so the answer is the one
        Kafka gives when its create.topic.policy refuses a topic: POLICY_VIOLATION with
        the policy's message (compat_tests/test_reserved_names.py), the same kind as every
        refused change to a view or a delay companion (``ResolvedTopic.refuse_change``)."""
        if naming.reserved_for_view(name):
            raise TopicError(
                ErrorCode.policy_violation,
                f"names ending in {naming.VIEW_SUFFIX!r} are reserved for full-data views",
            )
        if delay_naming.reserved_for_delay(name):
            raise TopicError(
                ErrorCode.policy_violation,
                f"names ending in {delay_naming.DELAY_SUFFIX!r} are reserved for delayed "
                "delivery (produce to T.delay once T exists: it is created then)",
            )

    def readable_partition(self, topic_partition: TopicPartition) -> ReadablePartition | None:
        """The partition Fetch and ListOffsets read, or None when there is no such partition.
        Raises TopicError(INVALID_TOPIC_EXCEPTION) for a delay companion, which nobody
        reads.

        The code is Kafka's for an operation a topic does not support: its ReplicaManager
        answers a produce to an internal topic with InvalidTopicException ("Cannot append
        to internal topic"), error 17, "The request attempted to perform an operation on
        an invalid topic" (Errors.java). TOPIC_AUTHORIZATION_FAILED would send an operator
        looking for an ACL that does not exist; INVALID_REQUEST says the request itself is
        malformed, and UNSUPPORTED_FOR_MESSAGE_FORMAT is about record format versions.
        Consumers fail the read as for TOPIC_AUTHORIZATION_FAILED: librdkafka reports a
        consumer error to the application, the Java client's poll throws (naming the
        code)."""
        resolved = self._owner(topic_partition)
        if resolved is None:
            return None
        if resolved.kind is TopicKind.DELAY:
            raise TopicError(
                ErrorCode.invalid_topic_exception,
                f"{resolved.name} is write-only: its records appear in {resolved.stored_name} "
                "when due; read that instead",
            )
        source_log = resolved.stored.logs[topic_partition.partition]
        if resolved.kind is TopicKind.VIEW:
            return ViewPartition(self.full_view, topic_partition, source_log.topic_partition)
        transactions = self.transactions.partition(topic_partition)
        return LogPartition(source_log, transactions)

    def writable_partition(self, topic_partition: TopicPartition) -> WritablePartition | None:
        """The log Produce appends to; None when there is no such partition. Raises
        TopicError(INVALID_REQUEST) for a partition of a read-only topic, as Kafka refuses
        a produce request a topic cannot take, and (``refuse_unknown``) for ``T.delay`` of
        no ``T``. Produce never creates a topic: Kafka creates them for Metadata only,
        where a producer's next request for the topic's leader does it."""
        resolved = self._owner(topic_partition)
        if resolved is None:
            self.refuse_unknown(topic_partition.topic)
            return None
        if not resolved.writable:
            resolved.refuse_change("produce to its topic instead", ErrorCode.invalid_request)
        log = resolved.stored.logs[topic_partition.partition]
        if resolved.kind is TopicKind.DELAY:
            max_delay_ms = self.delays.max_delay_ms
            return WritablePartition(
                log, resolved.stored, lambda batch, now: check_batch(batch, now, max_delay_ms)
            )
        if compacts(resolved.stored.configs):
            return WritablePartition(log, resolved.stored, keyless_refusal)
        return WritablePartition(log, resolved.stored)

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
            for topic in list(self.topics.by_name.values())
            for index in range(len(topic.logs))
        ]

    def _deletable(self, topic: Topic, index: int) -> DeletablePartition:
        if delay_naming.reserved_for_delay(topic.record.name):
            return DeletablePartition(topic.logs[index], topic, None, self.delays)
        view = self.full_view if self.full_view.keeps(topic) else None
        return DeletablePartition(topic.logs[index], topic, view)

    async def grow_companions(self, topic: str, partitions: int) -> None:
        """``topic`` now has ``partitions`` partitions: so has its delay companion, if any."""
        if not delay_naming.may_have_delay(topic):
            return
        companion = self.topics.get(delay_naming.delay_name(topic))
        if companion is not None and companion.record.partitions < partitions:
            # Follows a growth already allowed: not counted against the request's batch.
            await self.topics.add_partitions(companion.record.name, partitions, room=partitions)

    def stored_companions(self, topic: str) -> list[str]:
        """The stored topics that go when the stored topic ``topic`` goes: its delay
        companion, if it has one."""
        if not delay_naming.may_have_delay(topic):
            return []
        companion = delay_naming.delay_name(topic)
        return [companion] if self.topics.get(companion) is not None else []

    async def forget_derived(self, topic: str) -> None:
        """Deletes what the deleted topic ``topic`` had beside its stored companions: its
        view's data and its pending delayed records (nothing for those it never had)."""
        await self.full_view.forget_topic(topic)
        if delay_naming.may_have_delay(topic):
            await self.delays.forget_topic(topic, delay_naming.delay_name(topic))

    def derived_names(self, topic: str) -> list[str]:
        """The names that belong to the stored topic ``topic`` and go when it goes: its
        view's and its delay companion's, whether or not they exist now (no topic can take
        those names, so offsets committed under them belonged to the topic)."""
        names = [naming.view_name(topic)] if naming.may_have_view(topic) else []
        if delay_naming.may_have_delay(topic):
            names.append(delay_naming.delay_name(topic))
        return names

    def keeps_view(self, topic: str) -> bool:
        """True when the stored topic ``topic`` keeps its full-data view current (which must
        then see every append, and hold back retention until it has applied what goes):
        a view set on explicitly, or read once (full_view/view.py)."""
        stored = self.topics.get(topic)
        return stored is not None and self.full_view.keeps(stored)
