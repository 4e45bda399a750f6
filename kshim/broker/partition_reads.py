"""What Fetch and ListOffsets may do with a partition, whatever kind of topic holds it.

A topic's own partition reads its log: the high watermark bounds
read_uncommitted readers, the last stable offset (the first offset of the
oldest open transaction) bounds read_committed ones, and aborted transactions
in the range are listed so clients skip them (Kafka's protocol guide, Fetch
v4+; KIP-98). A full-data view's partition (``full_view/partition.py``) holds
committed data only and offers the same operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from kshim.broker.transactions.partition_state import PartitionTransactions
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import (
    Chunk,
    CorruptRecords,
    OffsetOutOfRange,
    PartitionLog,
    StorageReadFailed,
    TopicPartition,
)

# (offset, timestamp) of a record found by its timestamp
TimestampHit = tuple[int, int]


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int

    def latest(self, read_committed: bool) -> int:
        """The end a reader of this isolation level sees (ListOffsets LATEST, Fetch's bound)."""
        return self.last_stable_offset if read_committed else self.high_watermark


@dataclass(frozen=True, slots=True)
class PartitionRead:
    offsets: PartitionOffsets
    chunks: tuple[Chunk, ...] = ()
    # (producer id, first offset) of aborted transactions in the range, for read_committed
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)
    out_of_range: bool = False
    # Why the read failed, when the stored bytes could not be served (a Kafka error code):
    # see LogPartition.read.
    error_code: int = 0
    # The offset after the last batch read, or -1 where the reader does not say (a view,
    # whose offsets have gaps): how many offsets a fetch moved a consumer on.
    end_offset: int = -1


class ReadablePartition(Protocol):
    topic_partition: TopicPartition

    async def offsets(self) -> PartitionOffsets:
        """Log start, high watermark and last stable offset, now."""
        ...

    async def read(self, fetch_offset: int, max_bytes: int, read_committed: bool) -> PartitionRead:
        """Whole stored batches from ``fetch_offset`` up to what the isolation level may
        see, about ``max_bytes`` of them and at least one when any (KIP-74)."""
        ...

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        """The first visible record stamped at or after ``timestamp``, if any."""
        ...

    async def offset_of_max_timestamp(self) -> TimestampHit | None:
        """The visible record with the largest timestamp (the first of equals), if any."""
        ...


class LogPartition:
    """A partition of a topic's own log, with its transactions."""

    def __init__(self, log: PartitionLog, transactions: PartitionTransactions) -> None:
        self.topic_partition = log.topic_partition
        self._log = log
        self._transactions = transactions

    async def offsets(self) -> PartitionOffsets:
        high_watermark = self._log.high_watermark
        last_stable = self._transactions.last_stable_offset(high_watermark)
        return PartitionOffsets(self._log.log_start_offset, high_watermark, last_stable)

    async def read(self, fetch_offset: int, max_bytes: int, read_committed: bool) -> PartitionRead:
        offsets = await self.offsets()
        try:
            result = await self._log.read(fetch_offset, max_bytes, offsets.latest(read_committed))
        except OffsetOutOfRange:
            return PartitionRead(offsets, out_of_range=True)
        except CorruptRecords:
            # What Kafka's broker answers when its FileLogInputStream finds a stored batch
            # broken (CorruptRecordException -> CORRUPT_MESSAGE in ReplicaManager's
            # readFromLocalLog); its consumer raises it to the application rather than
            # retrying (FetchCollector), as retrying cannot mend the bytes on disk.
            return PartitionRead(offsets, error_code=ErrorCode.corrupt_message)
        except StorageReadFailed:
            # Kafka's answer for a log directory with I/O errors (KafkaStorageException);
            # consumers refresh their metadata and retry.
            return PartitionRead(offsets, error_code=ErrorCode.kafka_storage_error)
        aborted = []
        if read_committed:
            aborted = self._transactions.aborted_in_range(fetch_offset, result.end_offset)
        return PartitionRead(offsets, result.chunks, aborted, end_offset=result.end_offset)

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        return await self._log.offset_for_timestamp(timestamp)

    async def offset_of_max_timestamp(self) -> TimestampHit | None:
        return await self._log.offset_of_max_timestamp()
