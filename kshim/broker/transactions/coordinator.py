"""The transaction coordinator: transactional ids, epochs, EndTxn and markers.

A transaction's records are written to the log at once but stay invisible to
read_committed readers (below the last stable offset) until the producer's
second confirmation, EndTxn, writes a COMMIT or ABORT marker to every
partition it touched: the half-message scheme of VENUS and RocketMQ. Every
state change is persisted in LMDB before it is acted on, so a crash in
PrepareCommit/PrepareAbort is completed on restart (``load``).

The state machine lives here, as in Kafka's TransactionCoordinator.scala: each request
method (``init_producer``, ``add_partitions``, ``add_offsets``, ``commit_offsets``,
``end_transaction``) takes the transactional id's lock itself, checks fencing and the
transaction's state, and returns an ErrorCode (or a small answer from ``answers.py``);
handlers only translate requests into these calls. All methods run on the event loop's
thread; LMDB writes go to a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from kshim.broker.clock import as_broker_clock
from kshim.broker.transactions import transaction_states as states
from kshim.broker.transactions.answers import (
    ProducerIdAndEpoch,
    TransactionalOffset,
)
from kshim.broker.transactions.fencing import (
    MAX_EPOCH,
    NO_PRODUCER,
    check_fencing,
)
from kshim.broker.transactions.marker_retries import MarkerRetries, MarkerRetrySettings, Sleep
from kshim.broker.transactions.marker_writer import PartitionLookup, write_markers
from kshim.broker.transactions.partition_state import PartitionStates, PartitionTransactions
from kshim.broker.transactions.review_schedule import ReviewSchedule
from kshim.broker.transactions.transaction_records import TransactionRecords
from kshim.broker.transactions.transaction_states import TransactionState as State
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.transaction_store import TransactionRecord

log = logging.getLogger(__name__)

# Decides a transaction a previous producer instance left open (the reviewer's
# ``resolve``): called with the record and the reason, under the record's lock; True once
# decided (committed or aborted), False while undecided.
ReviewOpen = Callable[[TransactionRecord, str], Awaitable[bool]]
NEW_INSTANCE_REASON = "new producer instance"


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    marker_retries: MarkerRetrySettings = field(default_factory=MarkerRetrySettings)


class TransactionCoordinator(TransactionRecords):
    def __init__(
        self,
        metadata: MetadataStore,
        partition_log: PartitionLookup,
        clock: Callable[[], int],
        settings: TransactionSettings,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        super().__init__()
        self._metadata = metadata
        self._store = metadata.transactions
        self._partition_log = partition_log
        self._clock = as_broker_clock(clock)
        self.settings = settings
        self.partition_states = PartitionStates(self._store.aborted)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # Called with (record, committed) once markers are durable: group offsets.
        self.on_complete: list[Callable[[TransactionRecord, bool], object]] = []
        # Prepared transactions whose markers failed: retried by ``run_marker_retries``.
        self.marker_retries = MarkerRetries(settings.marker_retries, sleep)
        self.reviews = ReviewSchedule(self._clock)  # when each open one is next reviewed

    # Requests (Kafka's TransactionCoordinator.handle*): each takes its own lock

    async def init_producer(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int,
        epoch: int,
        review_open: ReviewOpen,
        *,
        fenced_code: bool,
    ) -> ProducerIdAndEpoch:
        """InitProducerId (handleInitProducerId). Without a transactional id: a new
        producer id, or, given a known id and epoch (KIP-360), the next epoch. With one:
        the id's producer id with its epoch bumped (fencing older instances), after
        ``review_open`` decided a transaction the previous instance left open;
        CONCURRENT_TRANSACTIONS while it stays undecided (the client retries).
        ``fenced_code``: the request version knows PRODUCER_FENCED (KIP-588)."""
        if transactional_id is None:
            return await self._init_idempotent(producer_id, epoch)
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return ProducerIdAndEpoch(ErrorCode.invalid_transaction_timeout)
        async with self.lock(transactional_id):
            record = self.records.get(transactional_id)
            if record is None:
                new_id = await asyncio.to_thread(self._metadata.allocate_producer_id)
                record = TransactionRecord(transactional_id, new_id, 0, timeout_ms, State.EMPTY)
                await self.persist(record)
                return ProducerIdAndEpoch(ErrorCode.none, record.producer_id, 0)
            if producer_id != NO_PRODUCER:
                error = check_fencing(record, producer_id, epoch, fenced_code=fenced_code)
                if error != ErrorCode.none:
                    return ProducerIdAndEpoch(error)
            if record.state in states.PREPARING:  # its markers are still being written
                return ProducerIdAndEpoch(ErrorCode.concurrent_transactions)
            if record.state == State.ONGOING and not await review_open(record, NEW_INSTANCE_REASON):
                return ProducerIdAndEpoch(ErrorCode.concurrent_transactions)
            await self.new_epoch(record)
            record.state = State.EMPTY
            record.timeout_ms = timeout_ms
            await self.persist(record)
            return ProducerIdAndEpoch(ErrorCode.none, record.producer_id, record.producer_epoch)

    async def _init_idempotent(self, producer_id: int, epoch: int) -> ProducerIdAndEpoch:
        if producer_id != NO_PRODUCER and 0 <= epoch < MAX_EPOCH - 1:
            return ProducerIdAndEpoch(ErrorCode.none, producer_id, epoch + 1)
        new_id = await asyncio.to_thread(self._metadata.allocate_producer_id)
        return ProducerIdAndEpoch(ErrorCode.none, new_id, 0)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Sequence[TopicPartition],
        writable: Callable[[TopicPartition], bool],
        *,
        fenced_code: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn (handleAddPartitionsToTransaction): each partition's error,
        in request order. A fencing or state error applies to every partition. A partition
        ``writable`` refuses is UNKNOWN_TOPIC_OR_PARTITION and the others
        OPERATION_NOT_ATTEMPTED: nothing is added. Otherwise the transaction is Ongoing
        with the partitions added (even when none were asked for)."""
        async with self.lock(transactional_id):
            record = self._writable_record(transactional_id, producer_id, epoch, fenced_code)
            if isinstance(record, ErrorCode):
                return dict.fromkeys(partitions, record)
            unknown = {tp for tp in partitions if not writable(tp)}
            if unknown:
                return {
                    tp: ErrorCode.unknown_topic_or_partition
                    if tp in unknown
                    else ErrorCode.operation_not_attempted
                    for tp in partitions
                }
            await self._begin(record, partitions)
            return dict.fromkeys(partitions, ErrorCode.none)

    async def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        *,
        fenced_code: bool,
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's offsets may be sent with the transaction
        (TxnOffsetCommit), which is then Ongoing. Kafka adds the group's
        __consumer_offsets partition; here the group's name is recorded."""
        async with self.lock(transactional_id):
            record = self._writable_record(transactional_id, producer_id, epoch, fenced_code)
            if isinstance(record, ErrorCode):
                return record
            if group_id not in record.groups:
                record.groups.append(group_id)
            await self._begin(record, [])
            return ErrorCode.none

    async def commit_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        offsets: Sequence[TransactionalOffset],
        check_member: Callable[[], ErrorCode],
        *,
        fenced_code: bool,
    ) -> ErrorCode:
        """TxnOffsetCommit (GroupCoordinator.handleTxnCommitOffsets in Kafka): holds the
        offsets in the transaction's record, durable, until it ends; they become the
        group's committed offsets on commit (``on_complete``). INVALID_TXN_STATE unless the
        transaction is Ongoing and AddOffsetsToTxn added the group; then ``check_member``,
        the group coordinator's verdict on the sender (KIP-447), is the answer unless it
        is NONE. Kafka verifies the transaction before it asks the group, so a request
        failing both gets the transaction's error."""
        async with self.lock(transactional_id):
            record = self._unfenced_record(transactional_id, producer_id, epoch, fenced_code)
            if isinstance(record, ErrorCode):
                return record
            if group_id not in record.groups or record.state != State.ONGOING:
                return ErrorCode.invalid_txn_state
            member_error = check_member()
            if member_error != ErrorCode.none:
                return member_error
            for offset in offsets:
                tp = offset.topic_partition
                record.pending_offsets.append((group_id, tp.topic, tp.partition, offset.offset,
                                               offset.leader_epoch, offset.metadata))  # fmt: skip
            await self.persist(record)
            return ErrorCode.none

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        *,
        fenced_code: bool,
    ) -> ErrorCode:
        """EndTxn (handleEndTransaction), the producer's second confirmation: markers are
        written to every partition of the transaction and durable before it returns, or,
        when writing them fails, left to the background retries (``end``). As Kafka's
        TransactionCoordinator.endTransaction answers by state: a retry of a completed
        EndTxn with the same outcome succeeds, CONCURRENT_TRANSACTIONS while that outcome
        is being completed; the other outcome, or a transaction with nothing added
        (Empty: clients end those without asking), is INVALID_TXN_STATE. An instance
        fenced by a newer epoch (a newer producer, or a review that already decided)
        cannot change the outcome."""
        async with self.lock(transactional_id):
            record = self._unfenced_record(transactional_id, producer_id, epoch, fenced_code)
            if isinstance(record, ErrorCode):
                return record
            if record.state == State.ONGOING:
                await self.end(record, commit)
                return ErrorCode.none
            if record.state == (State.COMPLETE_COMMIT if commit else State.COMPLETE_ABORT):
                return ErrorCode.none
            if record.state == (State.PREPARE_COMMIT if commit else State.PREPARE_ABORT):
                return ErrorCode.concurrent_transactions
            return ErrorCode.invalid_txn_state

    def _unfenced_record(
        self, transactional_id: str, producer_id: int, epoch: int, fenced_code: bool
    ) -> TransactionRecord | ErrorCode:
        """The record (``producer_id``, ``epoch``) may act for, or the fencing error."""
        record = self.records.get(transactional_id)
        error = check_fencing(record, producer_id, epoch, fenced_code=fenced_code)
        return record if error == ErrorCode.none and record is not None else error

    def _writable_record(
        self, transactional_id: str, producer_id: int, epoch: int, fenced_code: bool
    ) -> TransactionRecord | ErrorCode:
        """The record a request may add to, or its error: fencing, or
        CONCURRENT_TRANSACTIONS while the transaction's markers are being written."""
        record = self._unfenced_record(transactional_id, producer_id, epoch, fenced_code)
        if isinstance(record, TransactionRecord) and record.state in states.PREPARING:
            return ErrorCode.concurrent_transactions
        return record

    async def _begin(self, record: TransactionRecord, partitions: Sequence[TopicPartition]) -> None:
        """Moves the transaction to Ongoing (its review clock starting when it was not) and
        records the partitions it writes to."""
        if record.state != State.ONGOING:
            record.state = State.ONGOING
            record.started_ms = self._clock()
            self.reviews.schedule(record, record.timeout_ms)
            record.reviews = 0
        wanted = [
            (topic_partition.topic, topic_partition.partition) for topic_partition in partitions
        ]
        record.partitions = list(dict.fromkeys([*record.partitions, *wanted]))
        await self.persist(record)

    def lock(self, transactional_id: str) -> asyncio.Lock:
        """The lock every change to the transactional id's record is made under."""
        return self._locks[transactional_id]

    async def persist(self, record: TransactionRecord) -> None:
        """Stores the record (durable in LMDB) as the id's current state; caller holds
        its lock."""
        record.updated_ms = self._clock()
        self.records[record.transactional_id] = record
        await asyncio.to_thread(self._store.put, record)

    async def new_epoch(self, record: TransactionRecord) -> None:
        """Fences every older instance: the epoch goes up (a new id once it would
        overflow). Caller holds the record's lock and persists it."""
        if record.producer_epoch + 1 >= MAX_EPOCH - 1:
            record.producer_id = await asyncio.to_thread(self._metadata.allocate_producer_id)
            record.producer_epoch = 0
        else:
            record.producer_epoch += 1

    async def end(self, record: TransactionRecord, commit: bool) -> None:
        """Prepare, write markers everywhere, complete: the second confirmation. Caller
        holds the record's lock; raises ValueError unless the state may end.

        Once the prepared state is durable the outcome is decided, so a failure to write
        the markers is not the caller's: as in Kafka, the transaction stays prepared
        (CONCURRENT_TRANSACTIONS to its producer) and the markers are retried in the
        background (marker_retries.py) until they land."""
        target = State.PREPARE_COMMIT if commit else State.PREPARE_ABORT
        if not states.can_enter(record.state, target):
            raise ValueError(f"{record.transactional_id}: cannot end from {record.state}")
        record.state = target
        await self.persist(record)
        await self._complete_or_retry_later(record)

    async def _complete_or_retry_later(self, record: TransactionRecord) -> None:
        """Completes a prepared transaction, or queues it for the background retries when
        that fails. Caller holds the record's lock."""
        if not await self._try_complete(record):
            self.marker_retries.add(record.transactional_id)

    async def _retry_markers(self, transactional_id: str) -> bool:
        """One background retry (MarkerRetries' ``complete``): True once the transaction
        is no longer prepared."""
        async with self.lock(transactional_id):
            record = self.records.get(transactional_id)
            if record is None or record.state not in states.PREPARING:
                return True
            return await self._try_complete(record)

    async def _try_complete(self, record: TransactionRecord) -> bool:
        """Writes the markers and completes; False, logged, on any failure (a storage
        error, or a completion callback's): the transaction then stays prepared."""
        try:
            await self._complete(record, record.state == State.PREPARE_COMMIT)
        except Exception:
            log.exception("transaction %s: markers not written, still %s",
                          record.transactional_id, record.state)  # fmt: skip
            return False
        return True

    async def run_marker_retries(self) -> None:
        """The background job (kshim/broker/jobs/): retries failed markers until they land;
        runs until cancelled."""
        await self.marker_retries.run(self._retry_markers)

    async def _complete(self, record: TransactionRecord, commit: bool) -> None:
        await write_markers(
            record, commit, self._partition_log, self.partition, self._store, self._clock
        )
        for callback in self.on_complete:
            result = callback(record, commit)
            if asyncio.iscoroutine(result):
                await result
        record.state = State.COMPLETE_COMMIT if commit else State.COMPLETE_ABORT
        record.partitions = []
        record.groups = []
        record.pending_offsets = []  # applied on commit by on_complete, dropped on abort
        record.reviews = 0
        record.next_review_ms = -1
        self.reviews.forget(record.transactional_id)
        await self.persist(record)
        log.info("transaction %s %s", record.transactional_id, "committed" if commit else "aborted")

    # Partition states, start-up and expiry

    def partition(self, topic_partition: TopicPartition) -> PartitionTransactions:
        """The partition's open and aborted transactions (created on first use)."""
        return self.partition_states.get(topic_partition)

    async def load(self) -> None:
        """Loads every transaction and finishes those caught preparing by a crash (or
        queues them for the background retries when their markers cannot be written)."""
        self.records = await asyncio.to_thread(self._store.load)
        for record in list(self.records.values()):
            self.reviews.due(record)  # its deadline, from the wall clock now, not later
            if record.state in states.PREPARING:
                async with self.lock(record.transactional_id):
                    await self._complete_or_retry_later(record)

    async def expire_idle(self) -> int:
        """Forgets transactional ids idle (and not open) longer than the expiration, by
        their persisted wall times (kshim/broker/clock.py: ``expiry_now``)."""
        cutoff = self._clock.expiry_now() - self.settings.id_expiration_ms
        expired = [record for record in self.records.values()
                   if record.state in states.COMPLETED and record.updated_ms < cutoff]  # fmt: skip
        for record in expired:
            del self.records[record.transactional_id]
            self.reviews.forget(record.transactional_id)
            await asyncio.to_thread(self._store.delete, record.transactional_id)
        return len(expired)
