"""The transaction coordinator: transactional ids, epochs, EndTxn and markers.

A transaction's records are written to the log at once but stay invisible to
read_committed readers (below the last stable offset) until the producer's
second confirmation, EndTxn, writes a COMMIT or ABORT marker to every
partition it touched: the half-message scheme of VENUS and RocketMQ. Every
state change is persisted in LMDB before it is acted on, so a crash in
PrepareCommit/PrepareAbort is completed on restart (``recover``).

An ABORT marker's aborted-index entry is persisted before the marker is
appended, so a marker on disk is never without its entry.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kshim.broker.transactions import transaction_states as states
from kshim.broker.transactions.markers import marker_batch
from kshim.broker.transactions.partition_state import PartitionTransactions
from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import BatchHeader, read_header
from kshim.storage.interface import TopicPartition
from kshim.storage.metadata import MetadataStore
from kshim.storage.partition_log import LogFailed, PartitionLog
from kshim.storage.transaction_store import AbortedTransaction, TransactionRecord

log = logging.getLogger(__name__)
MAX_EPOCH = 32767
NO_PRODUCER = -1


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms


PartitionLookup = Callable[[TopicPartition], PartitionLog | None]


class TransactionCoordinator:
    def __init__(
        self,
        metadata: MetadataStore,
        partition_log: PartitionLookup,
        clock: Callable[[], int],
        settings: TransactionSettings,
    ) -> None:
        self._metadata = metadata
        self._store = metadata.transactions
        self._partition_log = partition_log
        self._clock = clock
        self.settings = settings
        self.records: dict[str, TransactionRecord] = {}
        self.partitions: dict[TopicPartition, PartitionTransactions] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # Called with (record, committed) once markers are durable: group offsets.
        self.on_complete: list[Callable[[TransactionRecord, bool], object]] = []

    def lock(self, transactional_id: str) -> asyncio.Lock:
        return self._locks[transactional_id]

    def partition(self, topic_partition: TopicPartition) -> PartitionTransactions:
        state = self.partitions.get(topic_partition)
        if state is None:
            state = PartitionTransactions(aborted=self._store.aborted(topic_partition))
            self.partitions[topic_partition] = state
        return state

    def forget_below(self, topic_partition: TopicPartition, log_start: int) -> None:
        """Drops the aborted transactions retention or DeleteRecords left without records
        (LMDB forgets them with the new log start: MetadataStore.set_log_start_offset)."""
        state = self.partitions.get(topic_partition)
        if state is not None:
            state.forget_below(log_start)

    def forget_topic(self, topic: str) -> None:
        """Drops a deleted topic's partition states (LMDB forgets them with the topic)."""
        for topic_partition in [tp for tp in self.partitions if tp.topic == topic]:
            del self.partitions[topic_partition]

    def recovery_callback(self, topic_partition: TopicPartition) -> Callable[[BatchHeader], None]:
        """Replays a partition's batch headers at start-up (open transactions)."""
        self.partitions.pop(topic_partition, None)
        return self.partition(topic_partition).recover

    async def load(self) -> None:
        """Loads every transaction and finishes those caught preparing by a crash."""
        self.records = await asyncio.to_thread(self._store.load)
        for record in list(self.records.values()):
            if record.state in states.PREPARING:
                async with self.lock(record.transactional_id):
                    await self._complete(record, record.state == states.PREPARE_COMMIT)

    async def persist(self, record: TransactionRecord) -> None:
        record.updated_ms = self._clock()
        self.records[record.transactional_id] = record
        await asyncio.to_thread(self._store.put, record)

    def check_fencing(
        self,
        record: TransactionRecord | None,
        producer_id: int,
        epoch: int,
        fenced_code: bool = True,
    ) -> ErrorCode:
        """The error for a request from (producer_id, epoch), or none.

        ``fenced_code`` False: the request version predates PRODUCER_FENCED (KIP-588), so
        an older epoch is answered INVALID_PRODUCER_EPOCH, as Kafka does.
        """
        if record is None or record.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch < record.producer_epoch:
            return ErrorCode.producer_fenced if fenced_code else ErrorCode.invalid_producer_epoch
        if epoch > record.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        return ErrorCode.none

    def check_produce(
        self, transactional_id: str | None, header: BatchHeader, topic_partition: TopicPartition
    ) -> ErrorCode:
        """Validates a transactional batch against its transaction (TV1 rules)."""
        record = self.records.get(transactional_id or "")
        if transactional_id is None or record is None or record.producer_id != header.producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if header.producer_epoch < record.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if record.state != states.ONGOING or (
            topic_partition.topic,
            topic_partition.partition,
        ) not in [tuple(partition) for partition in record.partitions]:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    def new_epoch(self, record: TransactionRecord) -> None:
        """Fences every older instance: the epoch goes up (a new id once it would overflow)."""
        if record.producer_epoch + 1 >= MAX_EPOCH - 1:
            record.producer_id = self._metadata.allocate_producer_id()
            record.producer_epoch = 0
        else:
            record.producer_epoch += 1

    async def end(self, record: TransactionRecord, commit: bool) -> None:
        """Prepare, write markers everywhere, complete: the second confirmation."""
        if not states.can_move(
            record.state, states.PREPARE_COMMIT if commit else states.PREPARE_ABORT
        ):
            raise ValueError(f"{record.transactional_id}: cannot end from {record.state}")
        record.state = states.PREPARE_COMMIT if commit else states.PREPARE_ABORT
        await self.persist(record)
        await self._complete(record, commit)

    async def _complete(self, record: TransactionRecord, commit: bool) -> None:
        await self._write_markers(record, commit)
        for callback in self.on_complete:
            result = callback(record, commit)
            if asyncio.iscoroutine(result):
                await result
        record.state = states.COMPLETE_COMMIT if commit else states.COMPLETE_ABORT
        record.partitions = []
        record.groups = []
        record.pending_offsets = []  # applied on commit by on_complete, dropped on abort
        record.reviews = 0
        record.next_review_ms = -1
        await self.persist(record)
        log.info("transaction %s %s", record.transactional_id, "committed" if commit else "aborted")

    async def _write_markers(self, record: TransactionRecord, commit: bool) -> None:
        written: list[tuple[PartitionLog, int]] = []
        for topic, index in record.partitions:
            topic_partition = TopicPartition(topic, index)
            partition_log = self._partition_log(topic_partition)
            state = self.partition(topic_partition)
            open_transaction = state.open.get(record.producer_id)
            if partition_log is None or open_transaction is None:
                continue  # no data written there, marker already written, or topic deleted
            if not commit:
                planned = AbortedTransaction(record.producer_id, open_transaction.first_offset,
                                             partition_log.log_end_offset)  # fmt: skip
                await asyncio.to_thread(self._store.add_aborted, topic_partition, planned)
            batch = marker_batch(record.producer_id, record.producer_epoch, commit, self._clock())
            header = read_header(batch)
            base_offset = partition_log.append(batch, header)
            if not commit:
                state.record_abort(
                    AbortedTransaction(
                        record.producer_id, open_transaction.first_offset, base_offset
                    )
                )
            state.on_append(header, base_offset)
            written.append((partition_log, base_offset))
        for partition_log, base_offset in written:
            try:
                await partition_log.wait_durable(base_offset)
            except LogFailed:
                log.exception("marker for %s not durable", record.transactional_id)
                raise

    async def init_producer(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int,
        epoch: int,
        resolve_open: Callable[[TransactionRecord], Awaitable[bool]],
        fenced_code: bool = True,
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId for a transactional id; ``resolve_open`` decides an open transaction."""
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, NO_PRODUCER, -1
        async with self.lock(transactional_id):
            record = self.records.get(transactional_id)
            if record is None:
                new_id = await asyncio.to_thread(self._metadata.allocate_producer_id)
                record = TransactionRecord(transactional_id, new_id, 0, timeout_ms, states.EMPTY)
                await self.persist(record)
                return ErrorCode.none, record.producer_id, record.producer_epoch
            if producer_id != NO_PRODUCER:
                error = self.check_fencing(record, producer_id, epoch, fenced_code)
                if error != ErrorCode.none:
                    return error, NO_PRODUCER, -1
            # An open transaction is decided by review first; undecided: the client retries.
            if record.state == states.ONGOING and not await resolve_open(record):
                return ErrorCode.concurrent_transactions, NO_PRODUCER, -1
            self.new_epoch(record)
            record.state = states.EMPTY
            record.timeout_ms = timeout_ms
            await self.persist(record)
            return ErrorCode.none, record.producer_id, record.producer_epoch

    async def add_partitions(
        self, record: TransactionRecord, partitions: list[TopicPartition]
    ) -> None:
        """Moves the transaction to Ongoing and records the partitions it writes to."""
        if record.state != states.ONGOING:
            record.state = states.ONGOING
            record.started_ms = self._clock()
            record.next_review_ms = record.started_ms + record.timeout_ms
            record.reviews = 0
        known = {tuple(partition) for partition in record.partitions}
        for topic_partition in partitions:
            if (topic_partition.topic, topic_partition.partition) not in known:
                record.partitions.append((topic_partition.topic, topic_partition.partition))
        await self.persist(record)

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group whose offsets an open transaction holds (TxnOffsetCommit)."""
        return {
            TopicPartition(topic, partition)
            for record in self.records.values()
            if record.state not in states.COMPLETED
            for group, topic, partition, *_ in record.pending_offsets
            if group == group_id
        }

    async def expire_idle(self) -> int:
        """Forgets transactional ids idle (and not open) longer than the expiration."""
        cutoff = self._clock() - self.settings.id_expiration_ms
        expired = [record for record in self.records.values()
                   if record.state in states.COMPLETED and record.updated_ms < cutoff]  # fmt: skip
        for record in expired:
            del self.records[record.transactional_id]
            await asyncio.to_thread(self._store.delete, record.transactional_id)
        return len(expired)
