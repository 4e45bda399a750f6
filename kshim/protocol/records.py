"""Individual records inside a v2 batch: decoding and building.

Off the hot path only: produce and fetch move whole batches. Record layout
(DefaultRecord.java): length varint, attributes int8, timestampDelta varlong,
offsetDelta varint, key (varint length, -1 = null), value (same), headers
count varint, then per header a varint-length key and a nullable value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kshim.protocol import compression
from kshim.protocol.primitives import (
    DecodeError,
    read_signed_varint,
    write_signed_varint,
)
from kshim.protocol.record_batch import (
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    crc_of,
    iter_batches,
    read_header,
)

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = field(default=())


def decode_records(batch: bytes | memoryview) -> tuple[BatchHeader, list[Record]]:
    """Decodes every record of one stored batch (decompressing if needed).

    Raises DecodeError for malformed record bytes.
    """
    header = read_header(batch)
    body = memoryview(batch)[RECORDS_OFFSET : header.size]
    try:
        raw = compression.decompress(header.compression_codec, body)
    except Exception as error:
        raise DecodeError(f"cannot decompress batch: {error}") from error
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    records = []
    position = 0
    for _ in range(header.records_count):
        record, position = _decode_record(raw, position, header, log_append_time)
        records.append(record)
    return header, records


def _decode_record(
    raw: bytes, position: int, header: BatchHeader, log_append_time: bool
) -> tuple[Record, int]:
    length, position = read_signed_varint(raw, position)
    end = position + length
    if end > len(raw):
        raise DecodeError("record runs past the end of its batch")
    position += 1  # attributes, unused
    timestamp_delta, position = read_signed_varint(raw, position)
    offset_delta, position = read_signed_varint(raw, position)
    key, position = _read_nullable_bytes(raw, position)
    value, position = _read_nullable_bytes(raw, position)
    header_count, position = read_signed_varint(raw, position)
    headers = []
    for _ in range(header_count):
        name, position = _read_nullable_bytes(raw, position)
        header_value, position = _read_nullable_bytes(raw, position)
        headers.append(((name or b"").decode("utf-8", errors="replace"), header_value))
    timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
    record = Record(header.base_offset + offset_delta, timestamp, key, value, tuple(headers))
    return record, end


def _read_nullable_bytes(raw: bytes, position: int) -> tuple[bytes | None, int]:
    length, position = read_signed_varint(raw, position)
    if length < 0:
        return None, position
    if position + length > len(raw):
        raise DecodeError("record field runs past the end of its batch")
    return raw[position : position + length], position + length


def iter_records(batches: bytes | memoryview) -> Iterator[Record]:
    """Yields every record of consecutive stored batches."""
    view = memoryview(batches)
    for position, header in iter_batches(view):
        yield from decode_records(view[position : position + header.size])[1]


@dataclass(frozen=True, slots=True)
class BatchSpec:
    """What ``build_batch`` needs beyond the records (defaults: a plain producer)."""

    base_offset: int = 0
    attributes: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    partition_leader_epoch: int = -1


def build_batch(records: Sequence[Record], spec: BatchSpec = BatchSpec()) -> bytes:
    """Encodes records into one v2 batch with a valid CRC (for control batches and tests).

    Record offsets and timestamps are taken relative to the first record.
    """
    base_timestamp = records[0].timestamp
    first_offset = records[0].offset
    body = b"".join(
        _encode_record(record, record.offset - first_offset, base_timestamp) for record in records
    )
    body = compression.compress(spec.attributes & 0x07, body)
    length = RECORDS_OFFSET + len(body) - LOG_OVERHEAD
    header = HEADER_STRUCT.pack(
        spec.base_offset, length, spec.partition_leader_epoch, 2, 0, spec.attributes,
        records[-1].offset - first_offset, base_timestamp,
        max(record.timestamp for record in records), spec.producer_id, spec.producer_epoch,
        spec.base_sequence, len(records),
    )  # fmt: skip
    batch = bytearray(header + body)
    struct.pack_into(">I", batch, CRC_OFFSET, crc_of(batch))
    return bytes(batch)


def _encode_record(record: Record, offset_delta: int, base_timestamp: int) -> bytes:
    parts = [
        b"\x00",
        write_signed_varint(record.timestamp - base_timestamp),
        write_signed_varint(offset_delta),
        _nullable_bytes(record.key),
        _nullable_bytes(record.value),
        write_signed_varint(len(record.headers)),
    ]
    for name, header_value in record.headers:
        parts += [_nullable_bytes(name.encode()), _nullable_bytes(header_value)]
    body = b"".join(parts)
    return write_signed_varint(len(body)) + body


def _nullable_bytes(data: bytes | None) -> bytes:
    if data is None:
        return write_signed_varint(-1)
    return write_signed_varint(len(data)) + data
