"""Record batch v2 (magic 2) headers: read, validate and patch, never decode records.

Layout (DefaultRecordBatch.java, https://kafka.apache.org/documentation/#recordbatch),
all integers big-endian:

    offset size field
    0      8    BaseOffset            rewritten by the broker on append
    8      4    Length                bytes after this field
    12     4    PartitionLeaderEpoch  rewritten by the broker, outside the CRC
    16     1    Magic                 must be 2
    17     4    CRC                   CRC-32C of bytes 21..end
    21     2    Attributes            codec(0-2) timestampType(3) transactional(4) control(5)
                                         deleteHorizon(6): BaseTimestamp is the delete horizon
    23     4    LastOffsetDelta
    27     8    BaseTimestamp
    35     8    MaxTimestamp
    43     8    ProducerId
    51     2    ProducerEpoch
    53     4    BaseSequence
    57     4    RecordsCount
    61     ...  Records (one compressed blob when the codec is not 0)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kshim.protocol.checksum import crc32c

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = BASE_OFFSET_OFFSET + 8
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + 4
MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + 4
CRC_OFFSET = MAGIC_OFFSET + 1
ATTRIBUTES_OFFSET = CRC_OFFSET + 4
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + 2
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + 4
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + 8
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + 2
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + 4
BATCH_OVERHEAD = RECORDS_OFFSET  # 61 bytes
LOG_OVERHEAD = PARTITION_LEADER_EPOCH_OFFSET  # BaseOffset + Length precede the counted bytes

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
# KIP-534: the log cleaner sets this on a batch holding tombstones or a transaction marker the
# first time it passes it, and BaseTimestamp then holds the time after which they may go
# (record timestamps stay BaseTimestamp plus their deltas, so readers see no difference).
DELETE_HORIZON_FLAG_MASK = 0x40
CURRENT_MAGIC = 2
NO_PRODUCER_ID = -1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class InvalidBatch(ValueError):
    """A batch that must be refused; ``corrupt`` selects CORRUPT_MESSAGE over INVALID_RECORD."""

    def __init__(self, message: str, corrupt: bool) -> None:
        super().__init__(message)
        self.corrupt = corrupt


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of one batch, as stored or received."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including BaseOffset and Length."""
        return LOG_OVERHEAD + self.length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.last_offset_delta

    @property
    def compression_codec(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def delete_horizon(self) -> int | None:
        """When the batch's tombstones or marker may be removed (KIP-534), or None when the
        log cleaner has not set it."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None


def read_header(buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Reads the header at ``position``; raises InvalidBatch if fewer than 61 bytes remain."""
    if len(buffer) - position < BATCH_OVERHEAD:
        raise InvalidBatch("record batch shorter than its 61-byte header", corrupt=True)
    return BatchHeader(*HEADER_STRUCT.unpack_from(buffer, position))


def crc_of(batch: bytes | bytearray | memoryview) -> int:
    """Returns the CRC-32C over the bytes the batch's CRC field covers."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def validate_produced(batch: bytes | bytearray | memoryview) -> BatchHeader:
    """Checks one batch sent by a producer and returns its header.

    Raises InvalidBatch for anything Kafka's LogValidator refuses: wrong magic,
    length mismatch, bad CRC (corrupt: the client resends), inconsistent
    counts, control batches from clients and a producer id without sequence.
    """
    header = read_header(batch)
    if header.magic != CURRENT_MAGIC:
        raise InvalidBatch(f"magic {header.magic} is not supported, only 2", corrupt=True)
    if header.size != len(batch):
        raise InvalidBatch(
            f"batch length field says {header.size} bytes, request holds {len(batch)}",
            corrupt=True,
        )
    if crc_of(batch) != header.crc:
        raise InvalidBatch("record batch CRC mismatch", corrupt=True)
    if header.records_count <= 0 or header.last_offset_delta + 1 != header.records_count:
        raise InvalidBatch("inconsistent batch offset range", corrupt=False)
    if header.is_control:
        raise InvalidBatch("clients are not allowed to write control records", corrupt=False)
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidBatch("producer id set without a base sequence", corrupt=False)
    return header


def stamped(batch: bytes | bytearray | memoryview, base_offset: int, epoch: int) -> bytes:
    """A copy of the batch with its base offset and leader epoch set (both outside the
    CRC), made in one pass: the stored bytes, without patching a mutable copy first."""
    view = memoryview(batch)
    return b"".join(
        (
            _INT64.pack(base_offset),
            view[LENGTH_OFFSET:PARTITION_LEADER_EPOCH_OFFSET],
            _INT32.pack(epoch),
            view[MAGIC_OFFSET:],
        )
    )


def set_log_append_time(batch: bytearray, now_ms: int) -> None:
    """Applies message.timestamp.type=LogAppendTime: flag, MaxTimestamp, new CRC."""
    (attributes,) = _INT16.unpack_from(batch, ATTRIBUTES_OFFSET)
    _INT16.pack_into(batch, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(batch, MAX_TIMESTAMP_OFFSET, now_ms)
    _UINT32.pack_into(batch, CRC_OFFSET, crc_of(batch))


def iter_batches(
    buffer: bytes | bytearray | memoryview, position: int = 0
) -> Iterator[tuple[int, BatchHeader]]:
    """Yields (position, header) of each complete batch, stopping at a partial one."""
    end = len(buffer)
    while end - position >= BATCH_OVERHEAD:
        header = read_header(buffer, position)
        if header.length < BATCH_OVERHEAD - LOG_OVERHEAD or position + header.size > end:
            return
        yield position, header
        position += header.size


def set_last_offset_delta(batch: bytearray, last_offset_delta: int) -> None:
    """Widens a batch's offset range past its last record, as Kafka's log cleaner leaves
    batches whose tail records were removed; the field is inside the CRC, so recompute."""
    _INT32.pack_into(batch, LAST_OFFSET_DELTA_OFFSET, last_offset_delta)
    _UINT32.pack_into(batch, CRC_OFFSET, crc_of(batch))


NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


def empty_batch(base_offset: int, last_offset_delta: int) -> bytes:
    """A v2 batch with no records spanning ``last_offset_delta + 1`` offsets: what Kafka's
    cleaner keeps when it removes every record of a batch, so readers move past the range."""
    header = HEADER_STRUCT.pack(
        base_offset, BATCH_OVERHEAD - LOG_OVERHEAD, NO_LEADER_EPOCH, CURRENT_MAGIC, 0, 0,
        last_offset_delta, NO_TIMESTAMP, NO_TIMESTAMP, NO_PRODUCER_ID, -1, -1, 0,
    )  # fmt: skip
    batch = bytearray(header)
    _UINT32.pack_into(batch, CRC_OFFSET, crc_of(batch))
    return bytes(batch)
