"""A compaction pass on disk: cleaned segments written beside the old ones, then swapped in.

The cleaning itself is cleaner.py's; this module reads the old segments, writes the new
ones and swaps them in so that a crash at any point leaves either the old segments or the
new one, never both in use and never neither (Kafka's .cleaned -> .swap -> rename, made
safe for a filesystem that may forget a rename not yet synced):

1. In a worker thread, each group of old segments is cleaned into
   ``{base:020d}.{generation}.cleaned``, ``generation`` one above the group's highest
   (segment.py), and its sealed index into ``{base:020d}.{generation}.sealed``; both are
   fsynced. No reader knows these files; recovery deletes them (an unfinished pass).
2. Under the store's checkpoint lock (no spill, retention or deletion meanwhile), the
   group is checked to still be in the log, then the ``.cleaned`` file is renamed to
   ``{base:020d}.{generation}.log``, a name no file had, and the directory is fsynced:
   that is the commit. From then on recovery keeps the new segment and deletes the old
   ones it overlaps (a higher generation wins); before it, the new name does not exist.
3. On the loop, the new segment replaces the old ones in the log's list: reads planned
   from then on use it. Reads planned before hold pins on the old files (read_pins.py);
   once none does, the old files go (with their index files) and the directory is synced.

The pass as a whole is cancellable at any await: the files then stay as one of the
states above, which recovery completes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from kshim.storage.compaction import (
    CompactionPlan,
    CompactionRequest,
    CompactionResult,
    group_segments,
)
from kshim.storage.files.filesystem import FileSystem
from kshim.storage.interface import CorruptRecords
from kshim.storage.log.cleaner import BatchCleaner, SegmentRewrite, clean_segments, start_pass
from kshim.storage.log.descriptor_cache import DescriptorCache
from kshim.storage.log.partition_log import DiskPartitionLog
from kshim.storage.log.sealed_index import (
    decode_sealed_index,
    encode_sealed_columns,
    sealed_path_for,
)
from kshim.storage.log.segment import (
    SEGMENT_SUFFIX,
    Segment,
    segment_file_name,
    segment_generation,
)
from kshim.storage.log.segment_check import check_batches
from kshim.storage.log.segment_writer import remove_segment_files

log = logging.getLogger(__name__)
CLEANED_SUFFIX = ".cleaned"
READ_CHUNK_BYTES = 8 << 20  # old segments are read this much at a time
# The worker thread lets go of the GIL this often. Cleaning is pure Python: left to the
# interpreter's 5 ms switch interval, it held the event loop back so much that one
# producer's acknowledged appends to another partition fell from about 2,400/s to 130/s
# during a pass over 100,000 records (p50 latency 0.3 -> 5.6 ms, on a busy 2-core VM);
# yielding every 0.5 ms kept them at 550-1,100/s (p50 0.7-1.3 ms), the pass taking up to
# twice as long while the loop is busy and no longer when it is idle.
YIELD_INTERVAL_S = 0.0005
_Result = TypeVar("_Result")
_Params = ParamSpec("_Params")


def cleaned_path_for(segment_path: str) -> str:
    """Where a cleaned segment is written before it is committed under ``segment_path``."""
    return segment_path[: -len(SEGMENT_SUFFIX)] + CLEANED_SUFFIX


@dataclass(slots=True)
class CleanedGroup:
    """One group's cleaned segment, written and fsynced, not yet committed."""

    old: list[Segment]
    new: Segment
    written_bytes: int


class DiskCompaction:
    """Compaction passes of one disk store, one at a time. Event loop only (the file
    work runs in worker threads)."""

    def __init__(
        self,
        filesystem: FileSystem,
        descriptors: DescriptorCache,
        lock: asyncio.Lock,
        memtable_freed: Callable[[int], None],
    ) -> None:
        self._fs = filesystem
        self._descriptors = descriptors
        self._lock = lock  # the checkpointer's: spills, retention and deletions take it
        self._memtable_freed = memtable_freed
        self._work: Awaitable[object] | None = None  # the worker thread's, if running

    async def idle(self) -> None:
        """Returns once no worker thread of a pass is running (the store is closing)."""
        if self._work is not None:
            await asyncio.gather(self._work, return_exceptions=True)

    async def run(
        self, partition_log: DiskPartitionLog, plan: CompactionPlan, request: CompactionRequest
    ) -> CompactionResult:
        """One pass (see the module docstring)."""
        segments = list(partition_log.segments)
        # Pinned while read, so that retention waits before it deletes their files.
        with partition_log.reads.pinned(segment.path for segment in segments):
            cleaner, to_clean, end = await self._in_thread(
                start_pass, segments, self._batches, plan, request
            )
        groups = group_segments([segment.size for segment in to_clean],
                                partition_log.config.segment_bytes)  # fmt: skip
        replaced = written = 0
        new_segments = 0
        for group in groups:
            old = [to_clean[index] for index in group]
            if partition_log.deleted:
                break
            if not partition_log.holds_segments(old):
                continue  # retention dropped them since the pass began
            with partition_log.reads.pinned(segment.path for segment in old):
                cleaned = await self._in_thread(self._clean_group, partition_log, old, cleaner)
            if cleaned is None or not await self._swap(partition_log, cleaned):
                continue
            replaced += len(old)
            new_segments += 1
            written += cleaned.written_bytes
        read = sum(segment.size for segment in to_clean)
        return CompactionResult(end, read, written, replaced, new_segments,
                                cleaner.kept_records, cleaner.removed_records)  # fmt: skip

    async def _in_thread(
        self, function: Callable[_Params, _Result], *args: _Params.args, **kwargs: _Params.kwargs
    ) -> _Result:
        """Runs ``function`` in a worker thread; a cancelled pass lets it finish (shielded),
        so that ``idle`` can wait for it."""
        work = asyncio.ensure_future(asyncio.to_thread(function, *args, **kwargs))
        self._work = work
        try:
            return await asyncio.shield(work)
        finally:
            if self._work is work and work.done():
                self._work = None

    # -- worker thread: reading and writing -------------------------------------------

    def _batches(self, segment: Segment) -> Iterator[memoryview]:
        """The segment's batches, read READ_CHUNK_BYTES at a time; between two, the GIL is
        let go every YIELD_INTERVAL_S (the event loop's thread waits for it)."""
        positions, count = segment.batch_positions, len(segment.batch_offsets)
        yielded = time.perf_counter()
        first = 0
        while first < count:
            start = positions[first]
            last = first
            while last + 1 < count and segment.batch_end(last + 1) - start <= READ_CHUNK_BYTES:
                last += 1
            length = segment.batch_end(last) - start
            data = memoryview(self._descriptors.pread(segment.path, length, start))
            _refuse_damaged(segment, data, first, start, length)
            for index in range(first, last + 1):
                yield data[positions[index] - start : segment.batch_end(index) - start]
                if time.perf_counter() - yielded >= YIELD_INTERVAL_S:
                    time.sleep(0)  # releases the GIL: a waiting thread takes it
                    yielded = time.perf_counter()
            first = last + 1

    def _clean_group(
        self, partition_log: DiskPartitionLog, old: list[Segment], cleaner: BatchCleaner
    ) -> CleanedGroup | None:
        """Cleans ``old`` into a new segment file and its sealed index, both fsynced; None
        when there is nothing to gain (one segment, unchanged)."""
        generation = max(segment_generation(segment.path) for segment in old) + 1
        base = old[0].base_offset
        path = os.path.join(partition_log.directory, segment_file_name(base, generation))
        temporary, sealed = cleaned_path_for(path), sealed_path_for(path)
        for leftover in (temporary, sealed):  # of a pass that failed or was cancelled
            if self._fs.exists(leftover):
                self._fs.remove(leftover)
        descriptor = self._fs.open_append(temporary)
        try:
            rewrite = SegmentRewrite(
                Segment(base, path, old[0].created_ms),
                lambda chunks: self._fs.write(descriptor, chunks),
            )
            clean_segments(old, self._batches, cleaner, rewrite)
            self._fs.fsync(descriptor)
        finally:
            self._fs.close(descriptor)
        if not rewrite.changed and len(old) == 1:
            self._fs.remove(temporary)
            return None
        self._write_sealed(sealed, rewrite)
        return CleanedGroup(old, rewrite.segment, rewrite.segment.size)

    def _write_sealed(self, path: str, rewrite: SegmentRewrite) -> None:
        descriptor = self._fs.open_append(path)
        try:
            index = encode_sealed_columns(rewrite.segment, rewrite.producer_ids, rewrite.producers)
            self._fs.write(descriptor, [index])
            self._fs.fsync(descriptor)
        finally:
            self._fs.close(descriptor)

    def _commit(self, directory: str, cleaned: CleanedGroup) -> None:
        """Names the cleaned segment (the commit), then maps its sealed index."""
        segment = cleaned.new
        self._fs.rename(cleaned_path_for(segment.path), segment.path)
        self._fs.fsync_directory(directory)
        mapped = self._fs.map_file(sealed_path_for(segment.path))
        index = decode_sealed_index(mapped, segment.base_offset, verify=False)
        if index is None:  # never expected: the index was written just now
            log.warning("%s: cleaned segment's sealed index unusable; kept in memory",
                        segment.path)  # fmt: skip
            segment.sealed = True
        else:
            index.adopt_into(segment)

    def _uncommit(self, directory: str, cleaned: CleanedGroup) -> None:
        """Deletes a committed cleaned segment whose old segments retention dropped."""
        paths = [cleaned.new.path, sealed_path_for(cleaned.new.path)]
        self._descriptors.forget(paths)
        for path in paths:
            if self._fs.exists(path):
                self._fs.remove(path)
        self._fs.fsync_directory(directory)

    def _discard(self, cleaned: CleanedGroup) -> None:
        for path in (cleaned_path_for(cleaned.new.path), sealed_path_for(cleaned.new.path)):
            if self._fs.exists(path):
                self._fs.remove(path)

    # -- the swap ---------------------------------------------------------------------

    async def _swap(self, partition_log: DiskPartitionLog, cleaned: CleanedGroup) -> bool:
        """Commits ``cleaned`` and swaps it in for its old segments, then deletes those once
        no read uses them; False (the cleaned files deleted) when the log changed meanwhile."""
        async with self._lock:
            if partition_log.deleted or not partition_log.holds_segments(cleaned.old):
                await self._in_thread(self._discard, cleaned)
                return False
            await self._in_thread(self._commit, partition_log.directory, cleaned)
            if partition_log.deleted:
                return False  # the deletion removes the whole directory once we let go
            if not partition_log.holds_segments(cleaned.old):
                # Retention dropped some of them meanwhile (their files go once we let go
                # of the lock): so must the cleaned segment, or recovery would find it
                # overlapping nothing.
                await self._in_thread(self._uncommit, partition_log.directory, cleaned)
                return False
            self._memtable_freed(partition_log.replace_segments(cleaned.old, cleaned.new))
        await partition_log.reads.released([segment.path for segment in cleaned.old])
        async with self._lock:
            if not partition_log.deleted:
                await self._in_thread(
                    remove_segment_files,
                    self._fs,
                    self._descriptors,
                    partition_log.writer,
                    partition_log.directory,
                    cleaned.old,
                )
        return True


def _refuse_damaged(
    segment: Segment, data: memoryview, first: int, start: int, length: int
) -> None:
    """Raises CorruptRecords when bytes recovery took from disk unchecked (segment_check.py)
    hold a damaged batch: cleaned, it would be rewritten with a fresh CRC or copied into a
    segment trusted as this process's own, and served as intact. The pass fails; Kafka's
    LogCleaner likewise gives up on a partition whose log it cannot read (its
    uncleanable partitions)."""
    check = segment.check
    if check is None or not check.needs_check(start, start + length):
        return
    _, bad_index, problem = check_batches(data, segment, first, start, length)
    if bad_index is not None:
        raise CorruptRecords(f"{segment.path}: record batch at byte "
                             f"{segment.batch_positions[bad_index]} is corrupt ({problem}); "
                             "the log cleaner leaves the partition as it is")  # fmt: skip
