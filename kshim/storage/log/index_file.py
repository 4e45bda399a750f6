"""The persistent batch index of a segment: ``{base_offset:020d}.index``.

Append-only blocks, each describing batches whose bytes were already fsynced
when the block was written ("the index trails the fsync"), so an intact
block always describes durable data and recovery need only CRC-check the
segment bytes after the last indexed batch: recovery time follows the
unflushed tail, not the log's size. The index is never fsynced itself: a
torn or lost block fails its CRC and the batches it covered are rescanned.

Each entry also keeps the batch's producer fields, so idempotent-producer
state is rebuilt at start-up from the index without reading the log.

Block layout (big-endian): count u32, end_position u64 (segment position
after the block's last batch), crc u32 (CRC-32C of the entries), then
``count`` entries of: base_offset i64, position i64, max_timestamp i64,
producer_id i64, producer_epoch i16, base_sequence i32, last_offset_delta
i32, attributes i16.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kshim.protocol.checksum import crc32c
from kshim.protocol.record_batch import CURRENT_MAGIC, LOG_OVERHEAD, BatchHeader

INDEX_SUFFIX = ".index"
BLOCK_HEADER = struct.Struct(">IQI")
ENTRY = struct.Struct(">qqqqhiih")


class IndexEntry(NamedTuple):
    base_offset: int
    position: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    attributes: int

    @classmethod
    def of(cls, header: BatchHeader, base_offset: int, position: int) -> IndexEntry:
        return cls(
            base_offset, position, header.max_timestamp, header.producer_id,
            header.producer_epoch, header.base_sequence, header.last_offset_delta,
            header.attributes,
        )  # fmt: skip

    def header(self, size: int) -> BatchHeader:
        """A header rebuilt from the entry (CRC and base timestamp are not kept: 0 and max)."""
        return BatchHeader(
            self.base_offset, size - LOG_OVERHEAD, 0, CURRENT_MAGIC, 0, self.attributes,
            self.last_offset_delta, self.max_timestamp, self.max_timestamp, self.producer_id,
            self.producer_epoch, self.base_sequence, self.last_offset_delta + 1,
        )  # fmt: skip


def index_path_for(segment_path: str) -> str:
    return segment_path.rsplit(".", 1)[0] + INDEX_SUFFIX


def encode_block(entries: Sequence[IndexEntry], end_position: int) -> bytes:
    """Returns one index block describing consecutive batches ending at ``end_position``."""
    body = b"".join(ENTRY.pack(*entry) for entry in entries)
    return BLOCK_HEADER.pack(len(entries), end_position, crc32c(body)) + body


def decode_blocks(data: bytes, segment_size: int) -> tuple[list[IndexEntry], int, int]:
    """Returns (entries, segment end position, index bytes used) of the intact chain of blocks.

    Stops at the first block that is torn, fails its CRC, does not start
    where the previous one ended, or ends past ``segment_size``.
    """
    entries: list[IndexEntry] = []
    end_position = 0
    position = 0
    while len(data) - position >= BLOCK_HEADER.size:
        count, block_end, crc = BLOCK_HEADER.unpack_from(data, position)
        start = position + BLOCK_HEADER.size
        body = data[start : start + count * ENTRY.size]
        if count == 0 or len(body) != count * ENTRY.size or crc32c(body) != crc:
            break
        block = [IndexEntry(*fields) for fields in ENTRY.iter_unpack(body)]
        if block[0].position != end_position or block_end > segment_size:
            break
        entries += block
        end_position = block_end
        position = start + len(body)
    return entries, end_position, position
