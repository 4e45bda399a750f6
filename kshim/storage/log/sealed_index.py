"""The memory-mapped index of a sealed segment: ``{base_offset:020d}.sealed``.

Once a segment is sealed (rolled, fully written and fsynced), its batch
index is rewritten as flat arrays, fsynced, and memory-mapped; the heap
arrays are dropped. Lookups binary-search the mapped arrays directly, so a
partition's memory stays flat however many sealed segments it has (the page
cache holds what is touched, as with Kafka's mmapped indexes), and recovery
adopts a sealed segment by mapping one file instead of reading its batches.

Layout (little-endian, 8-byte aligned): a 48-byte header (magic, count,
segment size, next offset, max timestamp, CRC-32C of the arrays), then six
int64 arrays of ``count`` entries: batch base offsets, file positions, batch
max timestamps, running max timestamps (the time index), producer ids, and
producer epoch/attributes/base sequence packed as ``epoch << 48 | attributes
<< 32 | sequence & 0xFFFFFFFF``.
"""

from __future__ import annotations

import mmap
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from kshim.protocol.checksum import crc32c
from kshim.storage.log.index_file import IndexEntry
from kshim.storage.log.segment import Segment

SEALED_SUFFIX = ".sealed"
MAGIC = b"KSHIMSI1"
HEADER = struct.Struct("<8sqqqqI4x")
ARRAY_COUNT = 6
LITTLE_ENDIAN = sys.byteorder == "little"


def sealed_path_for(segment_path: str) -> str:
    return segment_path.rsplit(".", 1)[0] + SEALED_SUFFIX


def pack_producer(entry: IndexEntry) -> int:
    return (
        (entry.producer_epoch << 48)
        | ((entry.attributes & 0xFFFF) << 32)
        | (entry.base_sequence & 0xFFFFFFFF)
    )


def unpack_producer(packed: int) -> tuple[int, int, int]:
    """Returns (epoch, attributes, base sequence) packed by ``pack_producer``."""
    sequence = packed & 0xFFFFFFFF
    if sequence >= 1 << 31:
        sequence -= 1 << 32
    attributes = (packed >> 32) & 0xFFFF
    return packed >> 48, attributes, sequence


def encode_sealed_index(segment: Segment, entries: Sequence[IndexEntry]) -> bytes:
    """Returns the sealed index of a segment whose batches ``entries`` describe, in order."""
    producer_ids = array("q", (entry.producer_id for entry in entries))
    producers = array("q", (pack_producer(entry) for entry in entries))
    return encode_sealed_columns(segment, producer_ids, producers)


def encode_sealed_columns(
    segment: Segment, producer_ids: Sequence[int], producers: Sequence[int]
) -> bytes:
    """``encode_sealed_index`` from the producer columns themselves (``pack_producer``'s),
    for a writer that keeps no IndexEntry per batch (the log cleaner)."""
    arrays = [
        array("q", segment.batch_offsets),
        array("q", segment.batch_positions),
        array("q", segment.batch_max_timestamps),
        array("q", segment.running_max_timestamps),
        array("q", producer_ids),
        array("q", producers),
    ]
    if not LITTLE_ENDIAN:
        for values in arrays:
            values.byteswap()
    body = b"".join(values.tobytes() for values in arrays)
    header = HEADER.pack(MAGIC, len(producer_ids), segment.size, segment.next_offset,
                         segment.max_timestamp, crc32c(body))  # fmt: skip
    return header + body


@dataclass(frozen=True, slots=True)
class SealedIndex:
    count: int
    segment_size: int
    next_offset: int
    max_timestamp: int
    columns: tuple[Sequence[int], ...]  # the six arrays, as int64 views of the mapping

    @property
    def producer_ids(self) -> Sequence[int]:
        return self.columns[4]

    @property
    def producer_fields(self) -> Sequence[int]:
        return self.columns[5]

    def adopt_into(self, segment: Segment) -> None:
        """Points the segment's index at the mapped arrays (replacing heap arrays)."""
        offsets, positions, batch_max, running_max = self.columns[:4]
        segment.batch_offsets = offsets  # type: ignore[assignment]
        segment.batch_positions = positions  # type: ignore[assignment]
        segment.batch_max_timestamps = batch_max  # type: ignore[assignment]
        segment.running_max_timestamps = running_max  # type: ignore[assignment]
        segment.size = self.segment_size
        segment.next_offset = self.next_offset
        segment.max_timestamp = self.max_timestamp
        segment.indexed_count = self.count
        segment.sealed = True


def decode_sealed_index(
    buffer: bytes | memoryview | mmap.mmap, base_offset: int, verify: bool
) -> SealedIndex | None:
    """Returns the index over ``buffer`` (an mmap or bytes), or None if it is unusable.

    With ``verify`` the arrays' CRC is checked (at recovery); the arrays are
    zero-copy views of ``buffer`` on little-endian machines.
    """
    view = memoryview(buffer)
    if len(view) < HEADER.size:
        return None
    magic, count, size, next_offset, max_timestamp, crc = HEADER.unpack_from(view, 0)
    body = view[HEADER.size : HEADER.size + ARRAY_COUNT * 8 * count]
    if magic != MAGIC or count <= 0 or len(body) != ARRAY_COUNT * 8 * count:
        return None
    if verify and crc32c(body) != crc:
        return None
    columns = tuple(_column(body[index * 8 * count : (index + 1) * 8 * count])
                    for index in range(ARRAY_COUNT))  # fmt: skip
    if columns[0][0] != base_offset:
        return None
    return SealedIndex(count, size, next_offset, max_timestamp, columns)


def _column(raw: memoryview) -> Sequence[int]:
    if LITTLE_ENDIAN:
        return raw.cast("q")
    values = array("q", raw.tobytes())
    values.byteswap()
    return values
