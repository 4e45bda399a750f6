"""Checking batches read back from disk after a restart, once per byte range.

Reads are served zero-copy (sendfile) from the segment files without looking at the bytes.
That is sound for what this process appended: every batch was CRC-checked when produced
(record_batch.validate_produced). Bytes recovery took from disk on the word of an index
(a sealed index, or the block index up to where it ends) were never checked since: a disk
that rotted them, or a file cut short, would have them served to consumers as they are,
which Kafka's broker also does (its FileRecords sends what the file holds) and leaves to
the consumer's ``check.crcs``.

Here the first read of such a range checks it instead: in a worker thread, its bytes are
read and every batch is held against the index (length field, base offset, magic) and its
CRC-32C, and the range is remembered as checked in the segment's ``SegmentCheck``, so every
later read of it is zero-copy again and costs nothing more. Batch boundaries come from the
index, never from a length field on disk. A batch that fails is remembered too and logged
once per segment at ERROR with the file and its position.

Threads: ``read_checked`` and ``check_batches`` may run in any thread; ``SegmentReads``
and the ``SegmentCheck`` it changes are the event loop's.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple, TypeVar

from kshim.protocol.record_batch import BATCH_OVERHEAD, CURRENT_MAGIC, crc_of, read_header
from kshim.storage.interface import Chunk, CorruptRecords, StorageReadFailed
from kshim.storage.log.descriptor_cache import DescriptorCache
from kshim.storage.log.read_pins import ReadPins
from kshim.storage.log.segment import Segment, SegmentCheck

log = logging.getLogger(__name__)
_Result = TypeVar("_Result")


class SegmentRead(NamedTuple):
    chunk: Chunk
    size: int
    cut_at: int | None  # the offset of a damaged batch that ended the read early, if any


class SegmentReads:
    """A partition log's reads of its segment files, checked where recovery left bytes
    unchecked. Event loop only."""

    def __init__(
        self, descriptors: DescriptorCache, pins: ReadPins, found_corrupt: Callable[[], None]
    ) -> None:
        """``pins``: the log's files being read (compaction keeps them meanwhile);
        ``found_corrupt`` is called once for each damaged batch found."""
        self._descriptors = descriptors
        self._pins = pins
        self._found_corrupt = found_corrupt
        self._failed: set[str] = set()  # files whose read failed (logged once each)

    async def read(self, segment: Segment, offset: int, position: int, length: int) -> SegmentRead:
        """The whole batches in [position, position + length), from the one holding
        ``offset``: a file region (zero-copy) where the bytes are known intact, else the
        bytes read and checked, up to a damaged batch. Raises CorruptRecords when the batch
        holding ``offset`` is damaged, StorageReadFailed when the file cannot be read."""
        check = segment.check  # None, at no cost, unless recovered bytes are unchecked
        if check is not None and check.needs_check(position, position + length):
            first = segment.batch_index_for(offset)
            read = await self._read_checked(segment, check, first, position, length)
            if read.bad_index is None:
                return SegmentRead(read.data, length, None)
            cut_at = segment.batch_offsets[read.bad_index]
            return SegmentRead(read.data[: read.intact], read.intact, cut_at)
        descriptors = self._descriptors
        chunk = descriptors.cached_region(segment.path, length, position)
        if chunk is None:
            read_chunk = descriptors.read_chunk
            chunk = await self._in_thread(segment, read_chunk, segment.path, length, position)
        return SegmentRead(chunk, length, None)

    async def read_batch(self, segment: Segment, index: int) -> bytes:
        """The bytes of batch ``index``; raises CorruptRecords when it is damaged."""
        position = segment.batch_positions[index]
        length = segment.batch_end(index) - position
        check = segment.check
        if check is not None and check.needs_check(position, position + length):
            return (await self._read_checked(segment, check, index, position, length)).data
        pread = self._descriptors.pread
        return await self._in_thread(segment, pread, segment.path, length, position)

    async def _read_checked(
        self, segment: Segment, check: SegmentCheck, first: int, position: int, length: int
    ) -> CheckedRead:
        """Reads and checks the batches in [position, position + length) from index
        ``first`` on, in a worker thread. Raises CorruptRecords when batch ``first`` is
        damaged; a later damaged one ends the intact bytes returned."""
        known = min((at for at in check.corrupt if position <= at < position + length),
                    default=None)  # fmt: skip
        if known == position:
            raise CorruptRecords(check.corrupt[known])
        if known is not None:  # read up to it only, never again through it
            length = known - position
        pread = self._descriptors.pread
        read = await self._in_thread(segment, read_checked, pread, segment, first, position, length)
        check.mark_checked(position, position + read.intact)
        if read.bad_index is None and known is not None:
            bad_index = bisect.bisect_left(segment.batch_positions, known)
            return replace(read, bad_index=bad_index, problem=check.corrupt[known])
        if read.bad_index is None:
            return read
        if segment.batch_positions[read.bad_index] not in check.corrupt:  # two reads at once
            self._found_corrupt()
        error = damaged(segment, check, read.bad_index, read.problem)
        if read.intact == 0:
            raise error
        return read

    async def _in_thread(
        self, segment: Segment, function: Callable[..., _Result], *args: object
    ) -> _Result:
        """``function(*args)`` in a worker thread, the file pinned. Raises StorageReadFailed
        when the disk fails the read: Kafka's LogSegment reads turn an IOException into a
        KafkaStorageException, which a fetch answers with KAFKA_STORAGE_ERROR."""
        try:
            with self._pins.pinned([segment.path]):
                return await asyncio.to_thread(function, *args)
        except OSError as error:
            if segment.path not in self._failed:
                self._failed.add(segment.path)
                log.error("reading %s failed: %s; reads of it answer KAFKA_STORAGE_ERROR",
                          segment.path, error)  # fmt: skip
            raise StorageReadFailed(f"reading {segment.path} failed: {error}") from error


Pread = Callable[[str, int, int], bytes]  # DescriptorCache.pread: (path, length, position)


@dataclass(frozen=True, slots=True)
class CheckedRead:
    """Bytes read from a segment: the first ``intact`` of them are whole batches that
    passed; ``bad_index`` is the batch that failed there (None when all passed)."""

    data: bytes
    intact: int
    bad_index: int | None = None
    problem: str = ""


def read_checked(
    pread: Pread, segment: Segment, first: int, position: int, length: int
) -> CheckedRead:
    """Reads [position, position + length), the whole batches from index ``first`` on, and
    checks them. Blocks; raises OSError when the file cannot be read."""
    data = pread(segment.path, length, position)
    intact, bad_index, problem = check_batches(data, segment, first, position, length)
    return CheckedRead(data, intact, bad_index, problem)


def check_batches(
    data: bytes | memoryview, segment: Segment, first: int, position: int, length: int
) -> tuple[int, int | None, str]:
    """Holds the batches the index places in [position, position + length) (from index
    ``first`` on) against ``data``, the bytes read there; returns (bytes of intact batches
    before the first bad one, its index or None, what is wrong with it)."""
    view = memoryview(data)
    index, at = first, 0
    while at < length:
        size = segment.batch_end(index) - position - at
        if at + size > len(view):
            return at, index, f"the file ends at byte {position + len(view)}"
        problem = _problem(view[at : at + size], size, segment.batch_offsets[index])
        if problem:
            return at, index, problem
        at += size
        index += 1
    return at, None, ""


def _problem(batch: memoryview, size: int, base_offset: int) -> str:
    """What is wrong with a stored batch the index says is ``size`` bytes at
    ``base_offset``; empty when nothing is."""
    if size < BATCH_OVERHEAD:
        return f"{size} bytes, shorter than a batch header"
    header = read_header(batch)
    if header.size != size:
        return f"length field says {header.size} bytes, the index {size}"
    if header.magic != CURRENT_MAGIC or header.base_offset != base_offset:
        return f"magic {header.magic}, base offset {header.base_offset}: not the indexed batch"
    if crc_of(batch) != header.crc:
        return "CRC-32C mismatch"
    return ""


def damaged(segment: Segment, check: SegmentCheck, index: int, problem: str) -> CorruptRecords:
    """Remembers batch ``index`` as damaged; logs the segment's first damage at ERROR.
    Returns the error for a read starting at that batch. Event loop only."""
    position = segment.batch_positions[index]
    message = (f"{segment.path}: record batch at byte {position} (offset "
               f"{segment.batch_offsets[index]}) is corrupt: {problem}")  # fmt: skip
    check.corrupt[position] = message
    if not check.reported:
        check.reported = True
        log.error("%s; reads of it answer CORRUPT_MESSAGE", message)
    return CorruptRecords(message)
