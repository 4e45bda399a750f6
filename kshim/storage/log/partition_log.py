"""A partition's ordered log on disk: memtable, segments, and the store's shared write-ahead log.

Appends run on the event loop and only touch memory: the batch gets its offsets and
joins the memtable and the list of batches the store's next flush round writes to the
write-ahead log (group_commit.py: one write and one fsync for every partition appended
to). The high watermark, the end of what consumers may see and producers get
acknowledged, advances only past batches that round made durable. Later the store
spills the batches from the memtable to the partition's segment files and, at a
checkpoint, makes those durable (checkpointer.py); the memtable keeps every batch until
it is spilled, so reads below the memtable always find their bytes in a segment file.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Protocol

from kshim.protocol.record_batch import BatchHeader, stamped
from kshim.storage.compaction import (
    CompactionPlan,
    CompactionRequest,
    CompactionResult,
    plan_compaction,
)
from kshim.storage.interface import (
    LEADER_EPOCH,
    Clock,
    LogConfig,
    LogFailed,
    ReadResult,
    TimestampHit,
    TopicPartition,
)
from kshim.storage.log.descriptor_cache import DescriptorCache
from kshim.storage.log.index_file import IndexEntry
from kshim.storage.log.memtable import Memtable
from kshim.storage.log.read_pins import ReadPins
from kshim.storage.log.recovery import RecoveredLog
from kshim.storage.log.segment import Segment, segment_file_name, segment_holding, should_roll
from kshim.storage.log.segment_check import SegmentReads
from kshim.storage.log.segment_writer import PendingBatch, SegmentWriter
from kshim.storage.log.segmented_log import SegmentedLog
from kshim.storage.log.timestamp_lookup import first_record_at_or_after, record_with_max_timestamp
from kshim.storage.log.wal_records import BATCH_RECORD, record_prefix


class LogHost(Protocol):
    """What a partition log needs from its store (log_store.py)."""

    descriptors: DescriptorCache

    @property
    def failure(self) -> BaseException | None:
        """The write error that stopped the store, if any: every append is refused."""
        ...

    def appended(self, log: DiskPartitionLog, size: int) -> None:
        """A batch of ``size`` bytes joined ``log``: the next flush round writes it."""
        ...

    def found_corrupt_batch(self) -> None:
        """A read found a stored batch damaged on disk (counted once per batch)."""
        ...

    def unspilled_changed(self, log: DiskPartitionLog, delta: int) -> None:
        """``log``'s batches waiting to be spilled grew (or shrank) by ``delta`` bytes."""
        ...

    async def drop_segments(self, log: DiskPartitionLog, dropped: list[Segment]) -> None:
        """Deletes the files of ``dropped`` segments, between spills."""
        ...

    async def compact(
        self, log: DiskPartitionLog, plan: CompactionPlan, request: CompactionRequest
    ) -> CompactionResult:
        """Runs the compaction pass ``plan`` over ``log`` (disk_compaction.py)."""
        ...


class DiskPartitionLog(SegmentedLog):
    """The disk implementation of interface.PartitionLog (see the module docstring).
    Not thread-safe: use from the event loop only."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        directory: str,
        config: LogConfig,
        clock: Clock,
        recovered: RecoveredLog,
        log_start_offset: int,
        host: LogHost,
        writer: SegmentWriter,
    ) -> None:
        self.topic_partition = topic_partition
        self.directory = directory
        self.config = config
        self._clock = clock
        self._host = host
        self.writer = writer
        self.segments: list[Segment] = recovered.segments
        self.log_end_offset = self.segments[-1].next_offset
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.high_watermark = self.log_end_offset
        self.spilled_offset = self.log_end_offset  # below it, every batch is in a segment file
        self.wal_prefix = record_prefix(BATCH_RECORD, topic_partition)
        # kshim.memtable.bytes bounds the memtable: half for batches waiting to be spilled
        # (the store spills them past that), half for spilled ones kept for tailing readers.
        self._memtable = Memtable(self.spill_threshold)
        self._memtable.next_offset = self.log_end_offset
        self._unlogged: list[PendingBatch] = []  # appended, not yet in the write-ahead log
        self._unspilled: list[PendingBatch] = []  # durable there, not yet in segment files
        self.unspilled_bytes = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.unsynced_messages = 0  # records written but not fsynced (flush.messages > 1)
        self.last_sync_ms = clock()
        self.listeners: list[Callable[[], None]] = []
        self.deleted = False  # set by the store's delete: appends are refused
        self.reads = ReadPins()  # segment files being read in worker threads
        self._segment_reads = SegmentReads(host.descriptors, self.reads, host.found_corrupt_batch)

    @property
    def memtable_bytes(self) -> int:
        return self._memtable.size

    @property
    def spill_threshold(self) -> int:
        """Unspilled bytes past which the partition's batches are spilled."""
        return self.config.memtable_bytes // 2

    def append(self, batch: bytes | bytearray | memoryview, header: BatchHeader) -> int:
        """Assigns offsets to a validated batch, stores it and returns its base offset.

        The batch becomes visible (and durable) only when the high watermark
        passes it: await ``wait_durable`` before acknowledging.
        """
        failure = self._host.failure
        if failure is not None:
            raise LogFailed(str(failure))
        if self.deleted:
            raise LogFailed(f"{self.topic_partition} was deleted")
        base_offset = self.log_end_offset
        next_offset = base_offset + header.last_offset_delta + 1
        data = stamped(batch, base_offset, LEADER_EPOCH)  # the caller's bytes stay as they are
        segment = self._segment_for(len(data))
        position = segment.add_batch(base_offset, len(data), next_offset, header.max_timestamp)
        self._memtable.append(base_offset, next_offset, data)
        self._unlogged.append((segment, data, IndexEntry.of(header, base_offset, position)))
        self.unsynced_messages += header.records_count
        self.log_end_offset = next_offset
        self._host.appended(self, len(data))
        return base_offset

    async def wait_durable(self, offset: int) -> None:
        """Returns once ``offset`` is below the high watermark; raises LogFailed on write errors."""
        if offset < self.high_watermark:
            return
        failure = self._host.failure
        if failure is not None:
            raise LogFailed(str(failure))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        await future

    def _segment_for(self, size: int) -> Segment:
        active = self.segments[-1]
        now = self._clock()
        if not should_roll(active.size, active.created_ms, size, now, self.config):
            return active
        path = os.path.join(self.directory, segment_file_name(self.log_end_offset))
        segment = Segment(self.log_end_offset, path, now)
        self.segments.append(segment)
        self.writer.roll(active)
        return segment

    # -- the store's flush rounds (group_commit.py) ------------------------------------

    def take_unlogged(self) -> list[PendingBatch]:
        """The batches appended since the last round; they wait to be spilled from now."""
        pending, self._unlogged = self._unlogged, []
        self._unspilled += pending
        size = sum(len(data) for _, data, _ in pending)
        self.unspilled_bytes += size
        self._host.unspilled_changed(self, size)
        return pending

    def take_for_segment(self) -> list[PendingBatch]:
        """The batches appended since the last round, for a round that writes them straight
        to their segment files (group_commit.py): they are never in the write-ahead log."""
        pending, self._unlogged = self._unlogged, []
        return pending

    def sync_due(self) -> bool:
        """Whether this round must fsync for this log: always with flush.messages=1 (the
        default); larger values trade safety for speed, bounded by flush.ms."""
        if self.config.flush_messages <= 1:
            return True
        elapsed = self._clock() - self.last_sync_ms
        return self.unsynced_messages >= self.config.flush_messages or (
            self.config.flush_ms > 0 and elapsed >= self.config.flush_ms
        )

    def synced(self, covered_messages: int) -> None:
        """A round's fsync covered ``covered_messages`` of the records counted unsynced
        (appends made while it ran count towards the next one)."""
        self.unsynced_messages -= covered_messages
        self.last_sync_ms = self._clock()

    def logged(self, offset: int) -> None:
        """The write-ahead log holds everything below ``offset``: it becomes visible."""
        self.high_watermark = offset
        # Listeners (long-polling fetches) first: their answers then go out before the
        # producers' acknowledgements, which nobody downstream waits on.
        for listener in self.listeners:
            listener()
        still_waiting = []
        for waited, future in self._waiters:
            if waited < offset:
                if not future.done():
                    future.set_result(None)
            else:
                still_waiting.append((waited, future))
        self._waiters = still_waiting

    def fail(self, error: BaseException) -> None:
        """The store failed to write: waiters get LogFailed."""
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(LogFailed(str(error)))
        self._waiters.clear()

    # -- spills and checkpoints (checkpointer.py) -----------------------------------

    def take_unspilled(self) -> list[PendingBatch]:
        """The durable batches not yet in segment files, for the store to write there
        (the store accounts for their bytes itself)."""
        pending, self._unspilled = self._unspilled, []
        self.unspilled_bytes = 0
        return pending

    def spilled(self, offset: int) -> int:
        """Everything below ``offset`` is in segment files: the memtable may let it go
        (down to its budget). Returns the bytes the memtable freed."""
        self.spilled_offset = max(self.spilled_offset, offset)
        return self._memtable.evict(self.spilled_offset)

    def release_memtable(self) -> int:
        """Drops every spilled batch from the memtable (the store is over its total
        memtable budget); returns the bytes freed."""
        return self._memtable.evict(self.spilled_offset, budget_bytes=0)

    # -- reads ----------------------------------------------------------------------

    async def read(
        self, offset: int, max_bytes: int, upper_offset: int | None = None
    ) -> ReadResult:
        """Returns whole batches from the one holding ``offset`` up to ``upper_offset``.

        ``upper_offset`` defaults to the high watermark (and is capped by it).
        Raises OffsetOutOfRange outside [log start offset, high watermark].
        """
        upper = self.read_upper(offset, upper_offset)
        if offset >= upper:
            return ReadResult((), 0, offset)
        if self._memtable.covers(offset):
            chunks, size, end = self._memtable.read(offset, max_bytes, upper)
            return ReadResult(tuple(chunks), size, end)
        # Below the memtable, everything is in segment files up to the spilled offset;
        # past it, the same segment's batches are read on from the memtable.
        segment = segment_holding(self.segments, offset)
        upper = min(upper, segment.next_offset)
        position, length, end = segment.byte_range(
            offset, max_bytes, min(upper, self.spilled_offset)
        )
        more: list[bytes] = []
        more_size = 0
        if end < upper and length < max_bytes and self._memtable.covers(end):
            # Taken before the file read: a spill meanwhile may drop them from memory.
            more, more_size, end = self._memtable.read(end, max_bytes - length, upper, False)
        chunk, size, cut_at = await self._segment_reads.read(segment, offset, position, length)
        if cut_at is not None:  # a damaged batch ends the read (segment_check.py)
            return ReadResult((chunk,), size, cut_at)
        return ReadResult((chunk, *more), length + more_size, end)

    async def _read_batch(self, segment: Segment, index: int) -> bytes:
        """The bytes of batch ``index`` of ``segment``, for timestamp lookups; raises
        CorruptRecords when it is damaged."""
        base = segment.batch_offsets[index]
        if self._memtable.covers(base):
            chunks, _, _ = self._memtable.read(base, 0, base + 1)
            return chunks[0]
        return await self._segment_reads.read_batch(segment, index)

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        """See interface.PartitionLog; reads one batch, from memory or in a worker thread."""
        visible = range(self.log_start_offset, self.high_watermark)
        segments = list(self.segments)  # the lookup's own list: compaction may swap some
        with self.reads.pinned(segment.path for segment in segments):
            return await first_record_at_or_after(segments, self._read_batch, visible, timestamp)

    async def offset_of_max_timestamp(self) -> TimestampHit | None:
        """See interface.PartitionLog; reads one batch, from memory or in a worker thread."""
        visible = range(self.log_start_offset, self.high_watermark)
        segments = list(self.segments)
        with self.reads.pinned(segment.path for segment in segments):
            return await record_with_max_timestamp(segments, self._read_batch, visible)

    # -- compaction (disk_compaction.py) -------------------------------------------------

    async def compact(self, request: CompactionRequest) -> CompactionResult | None:
        """See interface.PartitionLog.compact; only sealed segments are rewritten."""
        summaries = [segment.cleanable(segment.sealed) for segment in self.segments]
        plan = plan_compaction(summaries, self.log_start_offset, request)
        if plan is None or self.deleted:
            return None
        try:
            return await self._host.compact(self, plan, request)
        except OSError:
            if self.deleted:  # its files went while the pass read them
                return None
            raise

    def replace_segments(self, old: list[Segment], new: Segment) -> int:
        """Swaps ``new`` in for the consecutive segments ``old`` (still in the log: the
        caller checked); reads planned from now on use it. Returns the bytes the memtable
        freed: it lets go of the batches ``new`` replaces, so reads get the cleaned ones."""
        index = next(i for i, segment in enumerate(self.segments) if segment is old[0])
        self.segments[index : index + len(old)] = [new]
        return self._memtable.evict(new.next_offset, budget_bytes=0)

    def holds_segments(self, segments: list[Segment]) -> bool:
        """Whether ``segments`` are still consecutive segments of the log (retention or a
        deletion may have dropped them since a compaction read them)."""
        for index, segment in enumerate(self.segments):
            if segment is segments[0]:
                following = self.segments[index : index + len(segments)]
                return len(following) == len(segments) and all(
                    kept is wanted for kept, wanted in zip(following, segments, strict=True)
                )
        return False

    # -- the log start and retention ---------------------------------------------------

    async def drop_oldest_segments(self, count: int, log_start_offset: int) -> None:
        """Deletes the ``count`` oldest segments (never the active one) and their files."""
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return
        dropped, self.segments = self.segments[:count], self.segments[count:]
        first_kept = self.segments[0].base_offset
        self.log_start_offset = max(self.log_start_offset, log_start_offset, first_kept)
        # Batches of dropped segments never need spilling: nothing reads them any more.
        gone = {id(segment) for segment in dropped}
        self._unspilled = [batch for batch in self._unspilled if id(batch[0]) not in gone]
        before, self.unspilled_bytes = (
            self.unspilled_bytes,
            sum(len(data) for _, data, _ in self._unspilled),
        )
        self._host.unspilled_changed(self, self.unspilled_bytes - before)
        self.spilled(first_kept)
        await self._host.drop_segments(self, dropped)
