"""Rebuilding a partition's segments from its files after a restart or a crash.

Every segment is scanned header by header to rebuild its offset index. The
last segment is also checked batch by batch (length, CRC-32C, offsets that
follow on): the first batch that fails marks a torn tail, written but never
acknowledged, and the file is truncated there. Runs in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kshim.protocol.record_batch import (
    BATCH_OVERHEAD,
    BatchHeader,
    crc_of,
    read_header,
)
from kshim.storage.filesystem import FileSystem
from kshim.storage.segment import SEGMENT_SUFFIX, Segment, segment_file_name

READ_CHUNK_BYTES = 8 << 20


class CorruptLog(Exception):
    """A sealed segment is damaged; kshim refuses to guess which data is lost."""


def recover_segments(
    filesystem: FileSystem,
    directory: str,
    log_start_offset: int,
    now_ms: int,
    on_batch: Callable[[BatchHeader], None] | None = None,
) -> list[Segment]:
    """Returns the partition's segments, oldest first, with the active one last.

    A missing directory is created; an empty one yields one empty segment at
    ``log_start_offset``. Raises CorruptLog for damage before the last segment.
    """
    filesystem.make_directory(directory)
    names = [name for name in filesystem.list_directory(directory) if name.endswith(SEGMENT_SUFFIX)]
    segments: list[Segment] = []
    for position, name in enumerate(names):
        base_offset = int(name[: -len(SEGMENT_SUFFIX)])
        segment = Segment(base_offset, os.path.join(directory, name), now_ms)
        is_last = position == len(names) - 1
        _scan(filesystem, segment, verify=is_last, on_batch=on_batch)
        if segments and segment.base_offset != segments[-1].next_offset:
            raise CorruptLog(
                f"{segment.path} starts at {base_offset}, expected {segments[-1].next_offset}"
            )
        segments.append(segment)
    if not segments:
        path = os.path.join(directory, segment_file_name(log_start_offset))
        segments.append(Segment(log_start_offset, path, now_ms))
    return segments


def _scan(
    filesystem: FileSystem,
    segment: Segment,
    verify: bool,
    on_batch: Callable[[BatchHeader], None] | None,
) -> None:
    size = filesystem.size(segment.path)
    descriptor = filesystem.open_read(segment.path)
    try:
        valid_end = _index_batches(filesystem, descriptor, segment, size, verify, on_batch)
    finally:
        filesystem.close(descriptor)
    if valid_end < size:
        if not verify:
            raise CorruptLog(f"{segment.path} is damaged at byte {valid_end} of {size}")
        filesystem.truncate(segment.path, valid_end)


def _index_batches(
    filesystem: FileSystem,
    descriptor: int,
    segment: Segment,
    size: int,
    verify: bool,
    on_batch: Callable[[BatchHeader], None] | None,
) -> int:
    """Indexes every intact batch; returns the byte position where intact data ends."""
    position = 0
    while size - position >= BATCH_OVERHEAD:
        header = read_header(filesystem.pread(descriptor, BATCH_OVERHEAD, position))
        if not _plausible(header, segment, size - position):
            break
        if verify and not _crc_matches(filesystem, descriptor, header, position):
            break
        segment.add_batch(header.base_offset, header.size, header.next_offset, header.max_timestamp)
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


def _crc_matches(
    filesystem: FileSystem, descriptor: int, header: BatchHeader, position: int
) -> bool:
    if header.size > READ_CHUNK_BYTES * 16:
        return False
    batch = filesystem.pread(descriptor, header.size, position)
    return len(batch) == header.size and crc_of(batch) == header.crc
