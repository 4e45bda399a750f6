"""Rebuilding a partition's segments from its files after a restart or a crash.

Each segment's batches come from its index file as far as the index goes
(every indexed batch was fsynced before its entry was written); the bytes
after that are scanned batch by batch (length, magic, dense offsets,
CRC-32C). The first batch that fails marks a torn tail, never made durable in
the segment (a spill the power cut short): the segment is truncated there and
any later segment is removed. Then the batches the write-ahead log still holds
for the partition are replayed after the recovered end (``replay_logged``):
every acknowledged batch is in one of the two. What recovery scanned or
replayed is not synced here; the store's next checkpoint syncs and indexes it.
Bytes taken on an index's word are not read here: the first read of each range checks
them (segment_check.py). A sealed segment was complete and durable before its sealed index
was written, so one found shorter than that index says is damage, not a torn tail: its
index is kept, and so are the segments after it.

Compaction (disk_compaction.py) may have been cut short: its unfinished ``.cleaned`` files
go, and where a cleaned segment (a higher generation) overlaps the segments it replaced,
it stays and they go; index files left without their segment go too.
Runs in a worker thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kshim.protocol.record_batch import BATCH_OVERHEAD, BatchHeader, crc_of, read_header
from kshim.storage.files.filesystem import FileSystem
from kshim.storage.log.index_file import IndexEntry, decode_blocks, index_path_for
from kshim.storage.log.sealed_index import (
    SealedIndex,
    decode_sealed_index,
    sealed_path_for,
    unpack_producer,
)
from kshim.storage.log.segment import Segment, SegmentCheck, parse_segment_name, segment_file_name

log = logging.getLogger(__name__)
READ_CHUNK_BYTES = 8 << 20
CLEANED_SUFFIX = ".cleaned"  # a compaction's segment not yet committed (disk_compaction.py)
INDEX_SUFFIXES = (".index", ".sealed")
BatchCallback = Callable[[BatchHeader], None]


class CorruptLog(Exception):
    """Segments do not follow on from each other; kshim refuses to guess what is lost."""


@dataclass(slots=True)
class RecoveredLog:
    segments: list[Segment]
    # batches scanned rather than read from an index: (segment, entry, end position)
    unindexed: list[tuple[Segment, IndexEntry, int]] = field(default_factory=list)


def recover_segments(
    filesystem: FileSystem,
    directory: str,
    log_start_offset: int,
    now_ms: int,
    on_batch: BatchCallback | None = None,
) -> RecoveredLog:
    """Returns the partition's segments, oldest first (the active one last), and the
    recovered batches not yet in an index file. Raises CorruptLog on a gap.

    With thousands of partitions this runs thousands of times at start-up, so it asks
    the filesystem as little as it can: the directory listing says which index files
    exist, and a segment whose index covers it is not opened at all."""
    listed = _listing(filesystem, directory)
    if not listed:
        filesystem.make_directory(directory)
    listed = _remove_unfinished(filesystem, directory, listed)
    named = sorted(
        ((parsed, name) for name in listed if (parsed := parse_segment_name(name)) is not None),
        key=lambda item: (item[0][0], -item[0][1]),  # by base; the newest generation first
    )
    names = [name for _, name in named]
    present = set(listed)
    recovered = RecoveredLog([])
    generation = 0  # of the last segment recovered
    for position, ((base, its_generation), name) in enumerate(named):
        if recovered.segments and _replaced(recovered.segments[-1], generation, base,
                                            its_generation):  # fmt: skip
            _remove_segment_files(filesystem, directory, [name])
            continue
        segment = Segment(base, os.path.join(directory, name), now_ms)
        if recovered.segments and segment.base_offset != recovered.segments[-1].next_offset:
            raise CorruptLog(f"{segment.path} starts at {segment.base_offset}, expected "
                             f"{recovered.segments[-1].next_offset}")  # fmt: skip
        torn = _recover_segment(filesystem, segment, present, recovered, on_batch)
        recovered.segments.append(segment)
        generation = its_generation
        if torn:
            _remove_segment_files(filesystem, directory, names[position + 1 :])
            break
    if not recovered.segments or recovered.segments[-1].sealed:
        # Appends need an active segment; a sealed last one gets a fresh successor.
        base = recovered.segments[-1].next_offset if recovered.segments else log_start_offset
        path = os.path.join(directory, segment_file_name(base))
        recovered.segments.append(Segment(base, path, now_ms))
    return recovered


def replay_logged(
    filesystem: FileSystem,
    recovered: RecoveredLog,
    logged: Iterable[bytes],
    on_batch: BatchCallback | None = None,
) -> int:
    """Appends to the active segment the batches of ``logged`` (the partition's batches
    from the write-ahead log, in order) that follow the recovered end; those below it are
    there already. Returns how many were appended. Raises CorruptLog when one starts past
    the end: the segment lost bytes the write-ahead log no longer has."""
    active = recovered.segments[-1]
    appended: list[bytes] = []
    for batch in logged:
        header = read_header(batch)
        if header.next_offset <= active.next_offset:
            continue
        if header.base_offset != active.next_offset:
            raise CorruptLog(f"{active.path}: ends at offset {active.next_offset}, the write-"
                             f"ahead log goes on at {header.base_offset}")  # fmt: skip
        position = active.add_batch(
            header.base_offset, header.size, header.next_offset, header.max_timestamp
        )
        entry = IndexEntry.of(header, header.base_offset, position)
        recovered.unindexed.append((active, entry, position + header.size))
        appended.append(batch)
        if on_batch is not None:
            on_batch(header)
    if appended:
        descriptor = filesystem.open_append(active.path)
        try:
            filesystem.write(descriptor, list(appended))
        finally:
            filesystem.close(descriptor)
    return len(appended)


def _listing(filesystem: FileSystem, directory: str) -> list[str]:
    """The directory's names, none when it does not exist yet."""
    try:
        return filesystem.list_directory(directory)
    except FileNotFoundError:
        return []


def _adopt_sealed_index(
    filesystem: FileSystem,
    segment: Segment,
    size: int,
    present: set[str],
    on_batch: BatchCallback | None,
) -> bool:
    """Maps the segment's sealed index if it is intact and matches the file; True if adopted."""
    path = sealed_path_for(segment.path)
    if os.path.basename(path) not in present:
        return False
    index = decode_sealed_index(filesystem.map_file(path), segment.base_offset, verify=True)
    if index is None or index.segment_size < size:
        log.warning("%s: ignoring an unusable sealed index", path)
        return False
    if index.segment_size > size:
        # Sealed only once durable and complete, the file lost bytes since: damage, not a
        # torn write. Scanning would cut the log there and drop every later segment with
        # the acknowledged records they hold; the index keeps the offsets, and reads of
        # the missing batches answer CORRUPT_MESSAGE (segment_check.py).
        log.error("%s: %d bytes, shorter than its sealed index says (%d); its batches past "
                  "byte %d are lost", segment.path, size, index.segment_size, size)  # fmt: skip
    index.adopt_into(segment)
    if on_batch is not None:
        _replay_producers(index, on_batch)
    return True


def _replay_producers(index: SealedIndex, on_batch: BatchCallback) -> None:
    offsets, positions, _, running_max = index.columns[:4]
    for position, producer_id in enumerate(index.producer_ids):
        if producer_id < 0:
            continue
        last = position + 1 == index.count
        next_offset = index.next_offset if last else offsets[position + 1]
        end = index.segment_size if last else positions[position + 1]
        epoch, attributes, sequence = unpack_producer(index.producer_fields[position])
        entry = IndexEntry(offsets[position], positions[position], running_max[position],
                           producer_id, epoch, sequence, next_offset - offsets[position] - 1,
                           attributes)  # fmt: skip
        on_batch(entry.header(end - positions[position]))


def _recover_segment(
    filesystem: FileSystem,
    segment: Segment,
    present: set[str],
    recovered: RecoveredLog,
    on_batch: BatchCallback | None,
) -> bool:
    """Indexes one segment; returns True when its tail was torn and truncated. ``present``:
    the names in its directory."""
    size = filesystem.size(segment.path)
    if _adopt_sealed_index(filesystem, segment, size, present, on_batch):
        _unchecked_below(segment, segment.size)
        return False
    indexed_end = _load_index(filesystem, segment, size, present, on_batch)
    _unchecked_below(segment, indexed_end)  # the scan checks what follows
    valid_end = _scan(filesystem, segment, indexed_end, size, recovered, on_batch)
    if valid_end == size:
        return False
    log.warning("%s: truncating torn tail at byte %d of %d", segment.path, valid_end, size)
    filesystem.truncate(segment.path, valid_end)
    _fsync_file(filesystem, segment.path)
    return True


def _unchecked_below(segment: Segment, end: int) -> None:
    """The segment's bytes below ``end`` were taken on an index's word: each range is
    checked when first read (segment_check.py)."""
    segment.check = SegmentCheck(end) if end > 0 else None


def _load_index(
    filesystem: FileSystem,
    segment: Segment,
    size: int,
    present: set[str],
    on_batch: BatchCallback | None,
) -> int:
    """Adopts the segment's intact index entries; returns the position they end at."""
    path = index_path_for(segment.path)
    if os.path.basename(path) not in present:
        return 0
    data = filesystem.read_file(path)
    entries, end_position, used = decode_blocks(data, size)
    if entries and entries[0].base_offset != segment.base_offset:
        entries, end_position, used = [], 0, 0
    if used < len(data):
        filesystem.truncate(path, used)  # drop a torn block so later blocks chain on
    for index, entry in enumerate(entries):
        following = entries[index + 1].position if index + 1 < len(entries) else end_position
        batch_size = following - entry.position
        next_offset = entry.base_offset + entry.last_offset_delta + 1
        segment.add_batch(entry.base_offset, batch_size, next_offset, entry.max_timestamp)
        if on_batch is not None and entry.producer_id >= 0:
            on_batch(entry.header(batch_size))
    segment.indexed_count = len(entries)
    return end_position


def _scan(
    filesystem: FileSystem,
    segment: Segment,
    start: int,
    size: int,
    recovered: RecoveredLog,
    on_batch: BatchCallback | None,
) -> int:
    """CRC-checks the batches in [start, size); returns where intact data ends."""
    if size - start < BATCH_OVERHEAD:
        return start
    descriptor = filesystem.open_read(segment.path)
    try:
        position = start
        while size - position >= BATCH_OVERHEAD:
            chunk = filesystem.pread(descriptor, min(READ_CHUNK_BYTES, size - position), position)
            consumed = _scan_chunk(chunk, position, segment, recovered, on_batch)
            if consumed == 0:
                header = read_header(chunk)
                if not _plausible(header, segment, size - position):
                    break
                chunk = filesystem.pread(descriptor, header.size, position)  # one batch > chunk
                consumed = _scan_chunk(chunk, position, segment, recovered, on_batch)
                if consumed == 0:
                    break
            position += consumed
        return position
    finally:
        filesystem.close(descriptor)


def _scan_chunk(
    chunk: bytes,
    base: int,
    segment: Segment,
    recovered: RecoveredLog,
    on_batch: BatchCallback | None,
) -> int:
    """Indexes the intact whole batches at the start of ``chunk``; returns bytes consumed."""
    view = memoryview(chunk)
    position = 0
    while len(chunk) - position >= BATCH_OVERHEAD:
        header = read_header(view, position)
        if not _plausible(header, segment, len(chunk) - position):
            break
        if crc_of(view[position : position + header.size]) != header.crc:
            break
        segment.add_batch(header.base_offset, header.size, header.next_offset, header.max_timestamp)
        entry = IndexEntry.of(header, header.base_offset, base + position)
        recovered.unindexed.append((segment, entry, base + position + header.size))
        if on_batch is not None:
            on_batch(header)
        position += header.size
    return position


def _plausible(header: BatchHeader, segment: Segment, remaining: int) -> bool:
    return (
        header.magic == 2
        and BATCH_OVERHEAD <= header.size <= remaining
        and header.base_offset == segment.next_offset
        and header.last_offset_delta >= 0
    )


def _replaced(previous: Segment, previous_generation: int, base: int, generation: int) -> bool:
    """Whether a segment file based at ``base`` lies inside ``previous``, a cleaned
    segment of a higher generation that replaced it (a compaction committed, its old files
    not yet all deleted)."""
    return base < previous.next_offset and generation < previous_generation


def _remove_unfinished(filesystem: FileSystem, directory: str, listed: list[str]) -> list[str]:
    """Deletes an unfinished compaction's ``.cleaned`` files and index files without their
    segment; returns the names left."""
    stems = {name.rsplit(".", 1)[0] for name in listed if parse_segment_name(name) is not None}
    leftovers = [
        name
        for name in listed
        if name.endswith(CLEANED_SUFFIX)
        or (name.endswith(INDEX_SUFFIXES) and name.rsplit(".", 1)[0] not in stems)
    ]
    for name in leftovers:
        log.warning("%s: removing what an unfinished compaction left", name)
        filesystem.remove(os.path.join(directory, name))
    if leftovers:
        filesystem.fsync_directory(directory)
    return [name for name in listed if name not in leftovers]


def _remove_segment_files(filesystem: FileSystem, directory: str, names: list[str]) -> None:
    """Removes segments after a torn one, or replaced by a cleaned one, with their indexes."""
    for name in names:
        log.warning("%s: removing segment (after a torn one, or replaced)", name)
        path = os.path.join(directory, name)
        filesystem.remove(path)
        for index_name in (index_path_for(name), sealed_path_for(name)):
            if filesystem.exists(os.path.join(directory, index_name)):
                filesystem.remove(os.path.join(directory, index_name))
    filesystem.fsync_directory(directory)


def _fsync_file(filesystem: FileSystem, path: str) -> None:
    descriptor = filesystem.open_append(path)
    try:
        filesystem.fsync(descriptor)
    finally:
        filesystem.close(descriptor)
