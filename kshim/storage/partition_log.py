"""A partition's ordered log on disk: segments, memtable, group commit.

Appends run on the event loop and only touch memory: the batch gets its
offsets, joins the memtable and a pending list. One flusher task per
partition writes everything pending and fsyncs it (group commit: every append
made before the flusher's turn, or while the previous fsync ran, shares the
next one), on the event loop itself while the disk answers fast, otherwise in
a worker thread (see _write_inline); segment_writer.py does the writing,
fsyncing, indexing and sealing. The high watermark, the end of what
consumers may see and what producers get acknowledged, advances only past
bytes that are on disk.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable

from kshim.protocol.record_batch import BatchHeader, stamped
from kshim.storage.filesystem import FileSystem
from kshim.storage.index_file import IndexEntry, index_path_for
from kshim.storage.interface import (
    LEADER_EPOCH,
    Clock,
    LogConfig,
    LogFailed,
    OffsetOutOfRange,
    ReadResult,
    TimestampHit,
    TopicPartition,
)
from kshim.storage.memtable import Memtable
from kshim.storage.recovery import RecoveredLog, recover_segments
from kshim.storage.retention import SegmentSummary
from kshim.storage.sealed_index import sealed_path_for
from kshim.storage.segment import Segment, segment_file_name, segment_holding, should_roll
from kshim.storage.segment_writer import PendingBatch, SegmentWriter
from kshim.storage.timestamp_lookup import first_record_at_or_after, record_with_max_timestamp

PROBE_INTERVAL_S = 5.0  # how often a slow disk gets an inline round to re-measure it
# A pipelined request is about three loop turns from its append (read, decode, handle).
MIN_GATHER_TURNS, MAX_GATHER_TURNS = 3, 12


class DiskPartitionLog:
    """The disk implementation of interface.PartitionLog (see the module docstring).
    Not thread-safe: use from the event loop only."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        directory: str,
        config: LogConfig,
        filesystem: FileSystem,
        clock: Clock,
        recovered: RecoveredLog,
        log_start_offset: int,
    ) -> None:
        self.topic_partition = topic_partition
        self.directory = directory
        self.config = config
        self._fs = filesystem
        self._clock = clock
        self.segments = recovered.segments
        self.log_end_offset = self.segments[-1].next_offset
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.high_watermark = self.log_end_offset
        self._memtable = Memtable(config.memtable_bytes)
        self._memtable.next_offset = self.log_end_offset
        self._pending: list[PendingBatch] = []
        self._writer = SegmentWriter(filesystem, directory, self.segments, recovered.unindexed)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._read_descriptors: dict[str, int] = {}
        self._read_lock = threading.Lock()
        self._unsynced_messages = 0
        self._inline_write_us = 0.0  # moving average of an inline round's write and fsync
        self._last_inline_write = 0.0  # time.monotonic() of the last inline round
        self._last_sync_ms = clock()
        self._failure: BaseException | None = None
        self.listeners: list[Callable[[], None]] = []

    @classmethod
    async def open(
        cls,
        topic_partition: TopicPartition,
        directory: str,
        config: LogConfig,
        filesystem: FileSystem,
        clock: Clock,
        log_start_offset: int,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> DiskPartitionLog:
        """Opens (creating if needed) and recovers the log in ``directory``.

        Recovery reads the index files, CRC-checks the unindexed tail and
        truncates a torn one; it runs in a worker thread. ``on_batch`` sees
        every recovered header of an idempotent or transactional producer (batches
        scanned rather than read from an index are all reported).
        """
        recovered = await asyncio.to_thread(
            recover_segments, filesystem, directory, log_start_offset, clock(), on_batch
        )
        return cls(
            topic_partition, directory, config, filesystem, clock, recovered, log_start_offset
        )

    def append(self, batch: bytes | bytearray | memoryview, header: BatchHeader) -> int:
        """Assigns offsets to a validated batch, stores it and returns its base offset.

        The batch becomes visible (and durable) only when the high watermark
        passes it: await ``wait_durable`` before acknowledging.
        """
        if self._failure is not None:
            raise LogFailed(str(self._failure))
        base_offset = self.log_end_offset
        next_offset = base_offset + header.last_offset_delta + 1
        data = stamped(batch, base_offset, LEADER_EPOCH)  # the caller's bytes stay as they are
        segment = self._segment_for(len(data))
        position = segment.add_batch(base_offset, len(data), next_offset, header.max_timestamp)
        self._memtable.append(base_offset, next_offset, data)
        self._pending.append((segment, data, IndexEntry.of(header, base_offset, position)))
        self._unsynced_messages += header.records_count
        self.log_end_offset = next_offset
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        return base_offset

    async def wait_durable(self, offset: int) -> None:
        """Returns once ``offset`` is below the high watermark; raises LogFailed on write errors."""
        if offset < self.high_watermark:
            return
        if self._failure is not None:
            raise LogFailed(str(self._failure))
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
        self._writer.roll(active, segment)
        return segment

    async def _flush_loop(self) -> None:
        try:
            await self._gather_appends()
            while self._pending:
                pending, self._pending = self._pending, []
                target = self.log_end_offset
                sync = self._sync_due()
                # Appends arriving during this round count towards the next fsync.
                covered_messages = self._unsynced_messages
                if self._write_inline():
                    self._write_on_loop(pending, sync)
                else:
                    await asyncio.to_thread(self._writer.write, pending, sync)
                if sync:
                    self._unsynced_messages -= covered_messages
                    self._last_sync_ms = self._clock()
                self._advance_high_watermark(target)
        except Exception as error:  # a disk error: fail waiters, refuse further appends
            self._failure = error
            for _, future in self._waiters:
                if not future.done():
                    future.set_exception(LogFailed(str(error)))
            self._waiters.clear()
        finally:
            self._flusher = None

    async def _gather_appends(self) -> None:
        """Lets the loop turn a few times before an inline round, so that requests a
        client pipelined (already in the socket, a few loop turns from their append)
        share its fsync: an inline fsync blocks the loop, so nothing read after it
        starts could join it. Stops after a turn that appended nothing."""
        if not self._write_inline():
            return  # a worker-thread round overlaps the reads anyway
        for turn in range(MAX_GATHER_TURNS):
            before = self.log_end_offset
            await asyncio.sleep(0)
            if turn >= MIN_GATHER_TURNS and self.log_end_offset == before:
                return

    def _write_inline(self) -> bool:
        # On small VMs a hand-off to a worker thread and back costs ~100 µs of CPU (two
        # cross-CPU wake-ups), more than a fast disk's whole write and fsync, and adds that
        # much latency. A slow disk must not stall the event loop, though: once inline
        # rounds average over the limit, rounds go to a worker thread, with one inline
        # probe every PROBE_INTERVAL_S to notice when the disk is fast again. Sealing a
        # rolled segment (a sealed index to write and fsync) always goes to the thread.
        if self._writer.sealing_due or self.config.inline_write_max_us <= 0:
            return False
        if self._inline_write_us < self.config.inline_write_max_us:
            return True
        return time.monotonic() - self._last_inline_write >= PROBE_INTERVAL_S

    def _write_on_loop(self, pending: list[PendingBatch], sync: bool) -> None:
        started = time.perf_counter()
        self._writer.write(pending, sync)
        elapsed_us = (time.perf_counter() - started) * 1e6
        self._last_inline_write = time.monotonic()
        # A moving average, so one slow fsync does not send the next rounds to a thread.
        self._inline_write_us += (elapsed_us - self._inline_write_us) / 8

    def _sync_due(self) -> bool:
        # flush.messages=1 (the default) syncs every round; larger values trade
        # safety for speed, bounded by flush.ms.
        if self.config.flush_messages <= 1:
            return True
        elapsed = self._clock() - self._last_sync_ms
        return self._unsynced_messages >= self.config.flush_messages or (
            self.config.flush_ms > 0 and elapsed >= self.config.flush_ms
        )

    def _advance_high_watermark(self, offset: int) -> None:
        self.high_watermark = offset
        self._memtable.evict(offset)
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

    async def read(
        self, offset: int, max_bytes: int, upper_offset: int | None = None
    ) -> ReadResult:
        """Returns whole batches from the one holding ``offset`` up to ``upper_offset``.

        ``upper_offset`` defaults to the high watermark (and is capped by it).
        Raises OffsetOutOfRange outside [log start offset, high watermark].
        """
        if offset < self.log_start_offset or offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"{offset} outside [{self.log_start_offset}, {self.high_watermark}]"
            )
        upper = (
            self.high_watermark if upper_offset is None else min(upper_offset, self.high_watermark)
        )
        if offset >= upper:
            return ReadResult((), 0, offset)
        if self._memtable.covers(offset):
            chunks, size, end = self._memtable.read(offset, max_bytes, upper)
            return ReadResult(tuple(chunks), size, end)
        segment = segment_holding(self.segments, offset)
        position, length, end = segment.byte_range(offset, max_bytes, upper)
        descriptor = self._read_descriptors.get(segment.path)
        if descriptor is None:
            descriptor = await asyncio.to_thread(self._read_descriptor, segment.path)
        chunk = self._fs.region(descriptor, length, position)
        return ReadResult((chunk,), length, end)

    def _read_descriptor(self, path: str) -> int:
        """Worker thread: opens the segment for reading once and caches the descriptor."""
        with self._read_lock:
            descriptor = self._read_descriptors.get(path)
            if descriptor is None:
                descriptor = self._fs.open_read(path)
                self._read_descriptors[path] = descriptor
            return descriptor

    def _pread(self, path: str, length: int, position: int) -> bytes:
        """Worker thread: reads a byte range of a segment."""
        return self._fs.pread(self._read_descriptor(path), length, position)

    async def _read_batch(self, segment: Segment, index: int) -> bytes:
        """The bytes of batch ``index`` of ``segment``, for timestamp lookups."""
        base = segment.batch_offsets[index]
        if self._memtable.covers(base):
            chunks, _, _ = self._memtable.read(base, 0, base + 1)
            return chunks[0]
        position = segment.batch_positions[index]
        length = segment.batch_end(index) - position
        return await asyncio.to_thread(self._pread, segment.path, length, position)

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        """See interface.PartitionLog; reads one batch, from memory or in a worker thread."""
        visible = range(self.log_start_offset, self.high_watermark)
        return await first_record_at_or_after(self.segments, self._read_batch, visible, timestamp)

    async def offset_of_max_timestamp(self) -> TimestampHit | None:
        """See interface.PartitionLog; reads one batch, from memory or in a worker thread."""
        visible = range(self.log_start_offset, self.high_watermark)
        return await record_with_max_timestamp(self.segments, self._read_batch, visible)

    def advance_log_start_offset(self, offset: int) -> None:
        """Moves the log start offset forward (DeleteRecords, retention); never backwards."""
        if offset > self.high_watermark:
            raise OffsetOutOfRange(f"{offset} beyond high watermark {self.high_watermark}")
        self.log_start_offset = max(self.log_start_offset, offset)

    def segment_summaries(self) -> list[SegmentSummary]:
        """A snapshot of the segments for retention planning."""
        return [segment.summary() for segment in self.segments]

    async def drop_oldest_segments(self, count: int, log_start_offset: int) -> None:
        """Deletes the ``count`` oldest segments (never the active one) and their files."""
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return
        dropped, self.segments = self.segments[:count], self.segments[count:]
        self.log_start_offset = max(
            self.log_start_offset, log_start_offset, self.segments[0].base_offset
        )
        await asyncio.to_thread(self._remove_files, [segment.path for segment in dropped])

    def _remove_files(self, paths: list[str]) -> None:
        """Worker thread: closes readers of dropped segments and deletes their files."""
        with self._read_lock:
            descriptors = [self._read_descriptors.pop(path, None) for path in paths]
        for descriptor in descriptors:
            if descriptor is not None:
                self._fs.close(descriptor)
        listed = set(self._fs.list_directory(self.directory))
        for path in paths:
            self._fs.remove(path)
            for index_path in (index_path_for(path), sealed_path_for(path)):
                if os.path.basename(index_path) in listed:
                    self._fs.remove(index_path)
        self._fs.fsync_directory(self.directory)

    async def close(self) -> None:
        """Waits for pending writes, then closes every file descriptor."""
        if self._flusher is not None:
            await asyncio.shield(self._flusher)
        if self._writer.has_unsynced and self._failure is None:
            # A clean shutdown leaves nothing unsynced, even with flush.messages > 1.
            await asyncio.to_thread(self._writer.sync)
        self._writer.close()
        descriptors = list(self._read_descriptors.values())
        self._read_descriptors.clear()
        for descriptor in descriptors:
            self._fs.close(descriptor)
