"""The storage interface, in Kafka's words: the PartitionLog and LogStore protocols.

The broker sees a partition as a log with a log start offset, a log end
offset (next offset to assign) and a high watermark: the end of what is
durable and therefore visible to consumers. Reads return stored batch bytes,
never decoded records.

The broker holds logs through the ``PartitionLog`` and ``LogStore`` protocols
below. Two implementations pass the same conformance suite
(tests/storage/test_log_store_conformance.py): the disk store
(``DiskPartitionLog``, ``DiskLogStore``) and its in-memory twin
(``MemoryPartitionLog``, ``MemoryLogStore``) for tests without files.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kshim.protocol.record_batch import BatchHeader
from kshim.storage.compaction import CompactionRequest, CompactionResult
from kshim.storage.retention import SegmentSummary

Clock = Callable[[], int]  # milliseconds since the epoch
LEADER_EPOCH = 0  # a single broker stays leader of every partition in epoch 0


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class FileRegion:
    """A byte range of a segment file, sent with sendfile (zero-copy) by the server.

    Holds its own duplicate descriptor, so the segment may be deleted by
    retention meanwhile; the receiver must ``close()`` it once sent or dropped.
    ``on_close`` (if set) is called once, when it is closed.
    """

    __slots__ = ("_file", "descriptor", "length", "on_close", "position")

    def __init__(self, descriptor: int, position: int, length: int) -> None:
        self.descriptor = descriptor
        self.position = position
        self.length = length
        self._file: io.FileIO | None = None
        self.on_close: Callable[[], None] | None = None

    def __len__(self) -> int:
        return self.length

    def as_file(self) -> io.FileIO:
        """A file object over the descriptor, as ``loop.sendfile`` wants."""
        if self._file is None:
            self._file = io.FileIO(self.descriptor, "rb", closefd=True)
        return self._file

    def read_from(self, skip: int) -> bytes:
        """Reads the range's bytes after the first ``skip`` into memory (blocking)."""
        return os.pread(self.descriptor, self.length - skip, self.position + skip)

    def read_bytes(self) -> bytes:
        """Reads the range into memory and closes the region (blocking: tools and tests)."""
        try:
            return self.read_from(0)
        finally:
            self.close()

    def close(self) -> None:
        if self.descriptor < 0:
            return
        if self._file is not None:
            self._file.close()
        else:
            os.close(self.descriptor)
        self.descriptor = -1
        if self.on_close is not None:
            self.on_close()


Chunk = bytes | memoryview | FileRegion


def chunk_bytes(chunk: Chunk) -> bytes:
    """The bytes of a read chunk, reading (and closing) a file region: blocking."""
    return chunk.read_bytes() if isinstance(chunk, FileRegion) else bytes(chunk)


def chunks_bytes(chunks: Iterable[Chunk]) -> bytes:
    """The bytes of read chunks, one after the other (``chunk_bytes``): blocking."""
    return b"".join(chunk_bytes(chunk) for chunk in chunks)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches read from a log; ``chunks`` are ready to be sent as they are."""

    chunks: tuple[Chunk, ...]
    size: int
    end_offset: int  # the offset after the last batch returned (or the fetch offset)


class OffsetOutOfRange(Exception):
    """A read or seek outside [log start offset, high watermark]."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The per-partition settings the store honours (Kafka topic config names in comments)."""

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1: keep forever)
    retention_bytes: int = -1  # retention.bytes (-1: no size limit)
    flush_messages: int = 1  # flush.messages: 1 = fsync before every acknowledgement
    flush_ms: int = 0  # flush.ms: upper bound on unsynced time when flush.messages > 1
    memtable_bytes: int = 1 << 20  # kshim.memtable.bytes: recent batches served from memory


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The settings of the disk store as a whole (broker config names in comments)."""

    max_open_files: int = 128  # kshim.max.open.files: segment and index file descriptors
    memtable_total_bytes: int = 32 << 20  # kshim.memtable.total.bytes: all memtables together
    wal_segment_bytes: int = 64 << 20  # kshim.wal.segment.bytes: size of a write-ahead log file
    # kshim.wal.checkpoint.bytes and .interval.ms: a checkpoint once the write-ahead log grew
    # by this much, or this long after a write; recovery replays at most about that much.
    checkpoint_bytes: int = 32 << 20
    checkpoint_interval_ms: int = 5000
    # kshim.write.inline.max.us: flush rounds whose write and fsync take less than this
    # (moving average) run on the event loop instead of a worker thread; 0 = always a thread.
    inline_write_max_us: int = 5000


class LogFailed(Exception):
    """A write to this partition failed; it refuses appends until restarted."""


class CorruptRecords(Exception):
    """The stored batch where a read starts fails its checks (CRC-32C, length, offsets):
    the bytes on disk are not what was written. The message names the file and position."""


class StorageReadFailed(Exception):
    """Reading a segment file failed (an I/O error of the disk); other files may be fine."""


# What a timestamp lookup finds: (offset, timestamp) of one record.
TimestampHit = tuple[int, int]


class PartitionLog(Protocol):
    """One partition's log, as the broker uses it: Kafka's UnifiedLog, reduced.

    ``log_start_offset <= high_watermark <= log_end_offset`` always holds. An
    append takes its offsets from the log end at once, but reads and timestamp
    lookups see it only once the high watermark passes it: on a single broker
    the high watermark is the end of what is durable (what acks=all means).

    Threads: not thread-safe. Use every method and attribute from the event
    loop's thread; the async methods may hand blocking work to worker threads
    but resume on the loop.
    """

    # Assignable: AlterConfigs swaps in a new one and later appends and rolls honour it.
    config: LogConfig

    @property
    def topic_partition(self) -> TopicPartition: ...

    @property
    def log_start_offset(self) -> int:
        """The first offset a read may ask for; DeleteRecords and retention move it forward."""
        ...

    @property
    def high_watermark(self) -> int:
        """The offset after the last durable batch: reads and lookups stop there."""
        ...

    @property
    def log_end_offset(self) -> int:
        """The offset the next append will get."""
        ...

    @property
    def listeners(self) -> list[Callable[[], None]]:
        """Callbacks to append to: each is called on the loop every time the high
        watermark advances, before that advance's ``wait_durable`` callers resume (so
        a long-polling fetch answers ahead of the producer's acknowledgement)."""
        ...

    def append(self, batch: bytes | bytearray | memoryview, header: BatchHeader) -> int:
        """Stores a validated batch (``header`` parsed from it) and returns its base offset.

        The stored copy is stamped with its base offset and LEADER_EPOCH; the caller's
        bytes are not changed. Offsets are dense: the next batch starts at the base
        offset plus ``header.last_offset_delta + 1``. The batch is invisible until the
        high watermark passes it: await ``wait_durable`` before acknowledging. Raises
        LogFailed once a write has failed. Needs a running event loop.
        """
        ...

    async def wait_durable(self, offset: int) -> None:
        """Returns once the high watermark is past ``offset`` (at once if it already is);
        raises LogFailed if the write holding it failed."""
        ...

    async def read(
        self, offset: int, max_bytes: int, upper_offset: int | None = None
    ) -> ReadResult:
        """Returns stored batches, whole and in order, from the one holding ``offset``.

        At least one batch even if it is larger than ``max_bytes`` (KIP-74), more while
        the total stays within ``max_bytes``; none starting at or past ``upper_offset``
        (default: the high watermark; always capped by it). A read may stop early at a
        segment's end, as Kafka's does; ``end_offset`` says where to go on. Returns no
        chunks when ``offset`` is at the bound. Raises OffsetOutOfRange outside
        [log start offset, high watermark]. The caller must close FileRegion chunks.
        """
        ...

    def advance_log_start_offset(self, offset: int) -> None:
        """Moves the log start offset up to ``offset`` (DeleteRecords); never backwards.
        Raises OffsetOutOfRange past the high watermark. Deletes nothing itself."""
        ...

    def segment_summaries(self) -> list[SegmentSummary]:
        """A snapshot of the log's segments, oldest first, the active one last: the unit
        retention plans over (``plan_retention``) and drops."""
        ...

    async def drop_oldest_segments(self, count: int, log_start_offset: int) -> None:
        """Deletes the ``count`` oldest segments (never the active one) and raises the log
        start offset to at least ``log_start_offset`` and the first kept segment's base
        (Kafka's UnifiedLog.deleteOldSegments)."""
        ...

    async def compact(self, request: CompactionRequest) -> CompactionResult | None:
        """One pass of the log cleaner (storage/compaction.py, cleaner.py) when one is due
        or ``request.force``; None when none was. Offsets never change: records that are
        superseded, expired tombstones, aborted transactions' records and markers no
        longer needed go, and ranges left without a batch read as empty batches. Only
        segments below ``plan_compaction``'s bound are rewritten (never the active one);
        the CPU and file work runs in worker threads, and reads under way finish on the
        segments they started on."""
        ...

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        """The first visible record, in offset order, stamped at or after ``timestamp``
        (ListOffsets by time, KIP-79), or None. Control records count, as in Kafka's
        time index; only the batch holding the answer is decoded."""
        ...

    async def offset_of_max_timestamp(self) -> TimestampHit | None:
        """The earliest visible record with the largest timestamp (ListOffsets
        MAX_TIMESTAMP, KIP-734), a transaction marker included as in Kafka, or None when
        nothing is visible."""
        ...


@dataclass(frozen=True, slots=True)
class PartitionToOpen:
    """A partition ``LogStore.recover`` opens, with what ``LogStore.open`` would take."""

    topic_partition: TopicPartition
    config: LogConfig
    log_start_offset: int
    on_batch: Callable[[BatchHeader], None] | None = None


class LogStore(Protocol):
    """All partition logs of a broker. Use from the event loop's thread only."""

    async def recover(self, partitions: Sequence[PartitionToOpen]) -> Sequence[PartitionLog]:
        """Opens, in one pass, every partition stored before a restart, each as ``open``
        would (with ``on_batch`` seeing every recovered producer batch), and returns them
        in order. Call it once, before any ``open``: whatever the store kept for a
        partition not listed (a topic deleted while the broker went down) is deleted.
        The disk store raises CorruptLog (kshim.storage.log.recovery) or CorruptWriteAheadLog
        (kshim.storage.log.write_ahead_log) when its files do not follow on."""
        ...

    async def open(
        self,
        topic_partition: TopicPartition,
        config: LogConfig,
        log_start_offset: int,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> PartitionLog:
        """Opens the partition's log with everything it stored before, or an empty one
        whose first offset is ``log_start_offset`` (a partition created now).

        The log start offset is at least ``log_start_offset``; the high watermark is the
        log end. Before returning, ``on_batch`` sees, in offset order, the header of
        every recovered batch of an idempotent or transactional producer (producer id
        >= 0; others may be reported too), so producer and transaction state can be
        rebuilt. Assumes no log of the partition is open. The disk store raises
        CorruptLog (kshim.storage.log.recovery) when its segments do not follow on.
        """
        ...

    async def delete(self, topic_partition: TopicPartition) -> None:
        """Closes the partition's log if open and deletes what it stored: a later
        ``open`` starts empty. Deleting an unknown partition does nothing."""
        ...

    async def close(self) -> None:
        """Makes pending appends durable, then closes every open log."""
        ...

    async def write_failed(self) -> BaseException:
        """Returns the error once a write or fsync of the store has failed (from then on
        every log refuses appends with LogFailed: see PartitionLog.append); waits for
        ever on a store whose writes all succeed."""
        ...
