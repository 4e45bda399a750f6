"""The in-memory twin of the disk log store, for broker tests without files or processes.

It keeps what the disk store keeps, in memory: each segment's bytes (every
batch exactly as stored, stamped with its base offset and leader epoch) under
the disk segment's own index (``Segment``), so reads are planned, and offsets
found by timestamp, by the same code; offsets are assigned the same way and
segments rolled by the same segment.bytes and segment.ms rule
(``should_roll``), so retention plans over the same segment views, and a read
stops at a segment's end as the disk log's file reads do. Where the disk log
waits for its fsync, the twin waits one loop turn: an append becomes visible
(the high watermark advances, listeners run, ``wait_durable`` returns) on the
turn after it, all appends of a turn together, as a group commit would. Code
that forgets to await ``wait_durable`` fails here as it would on disk.

Compaction runs the disk store's cleaner (cleaner.py) over the same segments, on the loop,
and swaps the rewritten segments in at once: no file, so nothing to make durable.

A closed log's batches stay in its store, so opening the partition again is
the twin's restart (recovery replays the producer batches to ``on_batch``).
Not thread-safe: use from the event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kshim.protocol.record_batch import BatchHeader, iter_batches, stamped
from kshim.storage.compaction import (
    CompactionRequest,
    CompactionResult,
    group_segments,
    plan_compaction,
)
from kshim.storage.interface import (
    LEADER_EPOCH,
    Clock,
    LogConfig,
    LogFailed,
    LogStore,
    PartitionLog,
    PartitionToOpen,
    ReadResult,
    TimestampHit,
    TopicPartition,
)
from kshim.storage.log.cleaner import SegmentRewrite, clean_segments, start_pass
from kshim.storage.log.segment import Segment, segment_holding, should_roll
from kshim.storage.log.segmented_log import SegmentedLog
from kshim.storage.log.timestamp_lookup import first_record_at_or_after, record_with_max_timestamp


@dataclass(slots=True)
class MemorySegment(Segment):
    """A segment whose bytes are held in memory (``path`` names no file): the disk
    segment's index, so reads are planned and timestamps found by the same code."""

    data: bytearray = field(default_factory=bytearray)

    def read(self, offset: int, max_bytes: int, upper_offset: int) -> ReadResult:
        """Whole batches from the one holding ``offset`` (assumed in this segment and
        below ``upper_offset``), planned as the disk log's file reads (``byte_range``)."""
        position, length, end_offset = self.byte_range(offset, max_bytes, upper_offset)
        return ReadResult((bytes(self.data[position : position + length]),), length, end_offset)

    def batch_at(self, index: int) -> bytes:
        return bytes(self.data[self.batch_positions[index] : self.batch_end(index)])

    def extend(self, chunks: list[bytes | memoryview]) -> None:
        """Appends batches' bytes (a compaction filling a new segment)."""
        for chunk in chunks:
            self.data += chunk

    def batches(self) -> Iterator[memoryview]:
        """Every batch, in order (views of a copy: the segment's own bytes stay resizable)."""
        data = memoryview(bytes(self.data))
        for index in range(len(self.batch_offsets)):
            yield data[self.batch_positions[index] : self.batch_end(index)]


class MemoryPartitionLog(SegmentedLog):
    """The in-memory implementation of interface.PartitionLog (see the module docstring)."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        config: LogConfig,
        clock: Clock,
        segments: list[MemorySegment],
        log_start_offset: int,
    ) -> None:
        self.topic_partition = topic_partition
        self.config = config
        self._clock = clock
        self.segments: list[MemorySegment] = segments  # oldest first; the last is the active one
        self.log_end_offset = segments[-1].next_offset
        self.log_start_offset = max(log_start_offset, segments[0].base_offset)
        self.high_watermark = self.log_end_offset
        self.listeners: list[Callable[[], None]] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._durability_turn: asyncio.Handle | None = None
        self.closed = False

    def append(self, batch: bytes | bytearray | memoryview, header: BatchHeader) -> int:
        """See interface.PartitionLog.append. Raises LogFailed once the log is closed."""
        if self.closed:
            raise LogFailed(f"{self.topic_partition}: the log is closed")
        base_offset = self.log_end_offset
        next_offset = base_offset + header.last_offset_delta + 1
        data = stamped(batch, base_offset, LEADER_EPOCH)  # the caller's bytes stay as they are
        segment = self._segment_for(len(data))
        segment.add_batch(base_offset, len(data), next_offset, header.max_timestamp)
        segment.data += data
        self.log_end_offset = next_offset
        if self._durability_turn is None:
            loop = asyncio.get_running_loop()
            self._durability_turn = loop.call_soon(self._make_durable)
        return base_offset

    def _segment_for(self, size: int) -> MemorySegment:
        active = self.segments[-1]
        now = self._clock()
        if should_roll(active.size, active.created_ms, size, now, self.config):
            active = MemorySegment(self.log_end_offset, "", now)
            self.segments.append(active)
        return active

    def _make_durable(self) -> None:
        """The twin's flush round: everything appended so far becomes visible."""
        self._durability_turn = None
        self.high_watermark = self.log_end_offset
        # As the disk log: listeners (long-polling fetches) first, then the producers.
        for listener in self.listeners:
            listener()
        still_waiting = []
        for waited, future in self._waiters:
            if waited < self.high_watermark:
                if not future.done():
                    future.set_result(None)
            else:
                still_waiting.append((waited, future))
        self._waiters = still_waiting

    async def wait_durable(self, offset: int) -> None:
        """See interface.PartitionLog.wait_durable; an append is durable one turn later."""
        if offset < self.high_watermark:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        await future

    async def read(
        self, offset: int, max_bytes: int, upper_offset: int | None = None
    ) -> ReadResult:
        """See interface.PartitionLog.read: stops at a segment's end, as the disk log does
        (and Kafka's, which reads one LogSegment at a time). Chunks are ``bytes``."""
        upper = self.read_upper(offset, upper_offset)
        if offset >= upper:
            return ReadResult((), 0, offset)
        return segment_holding(self.segments, offset).read(offset, max_bytes, upper)

    async def _read_batch(self, segment: MemorySegment, index: int) -> bytes:
        return segment.batch_at(index)

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        """See interface.PartitionLog.offset_for_timestamp."""
        visible = range(self.log_start_offset, self.high_watermark)
        return await first_record_at_or_after(self.segments, self._read_batch, visible, timestamp)

    async def offset_of_max_timestamp(self) -> TimestampHit | None:
        """See interface.PartitionLog.offset_of_max_timestamp."""
        visible = range(self.log_start_offset, self.high_watermark)
        return await record_with_max_timestamp(self.segments, self._read_batch, visible)

    async def drop_oldest_segments(self, count: int, log_start_offset: int) -> None:
        """See interface.PartitionLog.drop_oldest_segments."""
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return
        self.segments = self.segments[count:]
        self.log_start_offset = max(
            self.log_start_offset, log_start_offset, self.segments[0].base_offset
        )

    async def compact(self, request: CompactionRequest) -> CompactionResult | None:
        """See interface.PartitionLog.compact: here all at once, on the loop."""
        segments = self.segments
        summaries = [segment.cleanable(sealed=True) for segment in segments]
        plan = plan_compaction(summaries, self.log_start_offset, request)
        if plan is None:
            return None
        cleaner, to_clean, end = start_pass(segments, MemorySegment.batches, plan, request)
        groups = group_segments([segment.size for segment in to_clean], self.config.segment_bytes)
        replaced: list[MemorySegment] = []
        swapped = 0
        for group in groups:
            old = [to_clean[index] for index in group]
            new = MemorySegment(old[0].base_offset, "", old[0].created_ms)
            rewrite = SegmentRewrite(new, new.extend)
            clean_segments(old, MemorySegment.batches, cleaner, rewrite)
            kept_as_is = not rewrite.changed and len(old) == 1  # as the disk store does
            replaced.append(old[0] if kept_as_is else new)
            swapped += 0 if kept_as_is else len(old)
        read = sum(segment.size for segment in to_clean)
        kept = {id(segment) for segment in to_clean}
        fresh = [segment for segment in replaced if id(segment) not in kept]
        written, new_segments = sum(segment.size for segment in fresh), len(fresh)
        self.segments = replaced + segments[len(to_clean) :]
        return CompactionResult(end, read, written, swapped, new_segments,
                                cleaner.kept_records, cleaner.removed_records)  # fmt: skip

    async def close(self) -> None:
        """Makes pending appends durable at once; later appends raise LogFailed."""
        if self._durability_turn is not None:
            self._durability_turn.cancel()
            self._make_durable()
        self.closed = True


class MemoryLogStore:
    """The in-memory implementation of interface.LogStore. Use from the event loop only."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        # The last log opened for each partition, open or closed: what a reopen recovers.
        self._logs: dict[TopicPartition, MemoryPartitionLog] = {}
        self._never_fails = asyncio.Event()

    async def recover(self, partitions: Sequence[PartitionToOpen]) -> Sequence[PartitionLog]:
        """See interface.LogStore.recover: opens each, and forgets the others' batches."""
        listed = {spec.topic_partition for spec in partitions}
        for topic_partition in [tp for tp in self._logs if tp not in listed]:
            await self.delete(topic_partition)
        return [
            await self.open(spec.topic_partition, spec.config, spec.log_start_offset, spec.on_batch)
            for spec in partitions
        ]

    async def open(
        self,
        topic_partition: TopicPartition,
        config: LogConfig,
        log_start_offset: int,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> MemoryPartitionLog:
        """See interface.LogStore.open. A log of the partition still open is closed first
        (its pending appends made durable), which the disk store leaves undefined."""
        previous = self._logs.get(topic_partition)
        if previous is None:
            segments = [MemorySegment(log_start_offset, "", self._clock())]
        else:
            await previous.close()
            segments = self._recover(previous, on_batch)
        log = MemoryPartitionLog(topic_partition, config, self._clock, segments, log_start_offset)
        self._logs[topic_partition] = log
        return log

    def _recover(
        self, previous: MemoryPartitionLog, on_batch: Callable[[BatchHeader], None] | None
    ) -> list[MemorySegment]:
        """The closed log's segments, its batches replayed as the disk store's recovery
        does; the active segment's age restarts, as recovery's does."""
        segments = list(previous.segments)
        segments[-1].created_ms = self._clock()
        if on_batch is not None:
            for segment in segments:
                for _, header in iter_batches(segment.data):
                    if header.producer_id >= 0:
                        on_batch(header)
        return segments

    async def write_failed(self) -> BaseException:
        """See interface.LogStore.write_failed: memory never fails a write."""
        await self._never_fails.wait()
        raise AssertionError("the memory store's writes never fail")

    def get(self, topic_partition: TopicPartition) -> MemoryPartitionLog | None:
        """The partition's open log, if any."""
        log = self._logs.get(topic_partition)
        return None if log is None or log.closed else log

    async def delete(self, topic_partition: TopicPartition) -> None:
        """See interface.LogStore.delete."""
        log = self._logs.pop(topic_partition, None)
        if log is not None:
            await log.close()

    async def close(self) -> None:
        """See interface.LogStore.close; the batches stay for a later ``open``."""
        for log in list(self._logs.values()):
            await log.close()


# Checked by mypy: the twin implements the same protocols as the disk store.
_MEMORY_LOG: type[PartitionLog] = MemoryPartitionLog
_MEMORY_STORE: type[LogStore] = MemoryLogStore
