"""Keyed records cut out of a stored batch, each re-framed as a one-record batch.

What compaction (the full-data view, the log cleaner) needs from a batch: each record's
offset, timestamp and key, whether it is a tombstone, and the record itself as a valid
one-record v2 batch at its own offset, or a batch rebuilt from the records it keeps.
``decode_records`` + ``build_batch`` would decode and re-encode the key, value and
headers of every record; here they are copied as they are: a record's bytes after its
offset delta (key, value, headers) do not depend on the batch it sits in, so only the
short prefix (length, attributes, timestamp delta, offset delta) and the batch header
are written anew. Pure; run it off the event loop.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from kshim.protocol import compression
from kshim.protocol.primitives import DecodeError, read_signed_varint, write_signed_varint
from kshim.protocol.record_batch import (
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    crc_of,
    read_header,
)

ZERO_DELTAS = b"\x00\x00\x00"  # attributes, timestamp delta 0, offset delta 0
PLAIN_PRODUCER = (-1, -1, -1)  # producer id, epoch, base sequence: not idempotent
_CRC = struct.Struct(">I")


class KeyedRecord(NamedTuple):  # a tuple: built for every record, so it must be cheap
    offset: int
    timestamp: int
    key: bytes
    is_tombstone: bool
    fields: bytes  # the record's key, value and headers as stored

    def one_record_batch(self) -> bytes:
        """The record alone in an uncompressed, non-transactional v2 batch at its offset."""
        body = ZERO_DELTAS + self.fields
        record = write_signed_varint(len(body)) + body
        length = RECORDS_OFFSET + len(record) - LOG_OVERHEAD
        header = HEADER_STRUCT.pack(
            self.offset, length, -1, 2, 0, 0, 0, self.timestamp, self.timestamp,
            *PLAIN_PRODUCER, 1,
        )  # fmt: skip
        batch = bytearray(header + record)
        _CRC.pack_into(batch, CRC_OFFSET, crc_of(batch))
        return bytes(batch)


def retained_batch(
    header: BatchHeader, kept: Sequence[KeyedRecord], delete_horizon: int | None
) -> bytes:
    """The batch of ``header`` holding only ``kept`` (some of its records, in order), as
    Kafka's log cleaner rewrites it (MemoryRecords.filterTo): the same base offset, offset
    range (the last offset delta stays, so the producer's last sequence does too), producer
    fields, leader epoch and codec; the delete horizon flagged in the attributes and held
    in BaseTimestamp when given (KIP-534). With nothing kept, an empty batch (no codec)
    that keeps the offset range and producer fields: Kafka's RETAIN_EMPTY."""
    attributes = header.attributes & ~DELETE_HORIZON_FLAG_MASK
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    if not kept:
        attributes &= ~COMPRESSION_CODEC_MASK
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    if delete_horizon is not None:
        base_timestamp = delete_horizon
    else:
        base_timestamp = kept[0].timestamp if kept else header.max_timestamp
    if log_append_time or not kept:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(record.timestamp for record in kept)
    body = b"".join(
        _record_bytes(record, record.offset - header.base_offset, base_timestamp) for record in kept
    )
    body = compression.compress(attributes & COMPRESSION_CODEC_MASK, body)
    length = RECORDS_OFFSET + len(body) - LOG_OVERHEAD
    fields = HEADER_STRUCT.pack(
        header.base_offset, length, header.partition_leader_epoch, header.magic, 0, attributes,
        header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, len(kept),
    )  # fmt: skip
    batch = bytearray(fields + body)
    _CRC.pack_into(batch, CRC_OFFSET, crc_of(batch))
    return bytes(batch)


def _record_bytes(record: KeyedRecord, offset_delta: int, base_timestamp: int) -> bytes:
    """One record framed for a batch based at ``base_timestamp``: its stored key, value and
    headers after a new prefix (attributes, timestamp delta, offset delta)."""
    body = b"".join(
        (
            b"\x00",
            write_signed_varint(record.timestamp - base_timestamp),
            write_signed_varint(offset_delta),
            record.fields,
        )
    )
    return write_signed_varint(len(body)) + body


def keyed_records(
    batch: bytes | memoryview, header: BatchHeader | None = None
) -> Iterator[KeyedRecord]:
    """Yields the records of one stored batch that have a key, in offset order; ``header``
    is the batch's, when the caller read it already.

    Raises DecodeError for malformed record bytes.
    """
    if header is None:
        header = read_header(batch)
    body = memoryview(batch)[RECORDS_OFFSET : header.size]
    try:
        raw = compression.decompress(header.compression_codec, body)
    except Exception as error:
        raise DecodeError(f"cannot decompress batch: {error}") from error
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    position = 0
    for _ in range(header.records_count):
        length, position = _signed_varint(raw, position)
        end = position + length
        if length < 3 or end > len(raw):
            raise DecodeError("record runs past the end of its batch")
        timestamp_delta, fields_at = _signed_varint(raw, position + 1)
        offset_delta, fields_at = _signed_varint(raw, fields_at)
        key_length, key_at = _signed_varint(raw, fields_at)
        if key_length >= 0:
            if key_at + key_length > end:
                raise DecodeError("record key runs past the end of its record")
            value_length, _ = _signed_varint(raw, key_at + key_length)
            timestamp = header.max_timestamp if log_append_time else header.base_timestamp
            yield KeyedRecord(
                header.base_offset + offset_delta,
                timestamp if log_append_time else timestamp + timestamp_delta,
                raw[key_at : key_at + key_length],
                value_length < 0,
                raw[fields_at:end],
            )
        position = end


def _signed_varint(raw: bytes, position: int) -> tuple[int, int]:
    """``read_signed_varint`` with the one- and two-byte cases (deltas and lengths below
    8 KiB, nearly all of them) inline: this loop runs for every record of the view."""
    if position + 1 < len(raw):
        first = raw[position]
        if first < 0x80:
            return (first >> 1) ^ -(first & 1), position + 1
        second = raw[position + 1]
        if second < 0x80:
            value = (first & 0x7F) | (second << 7)
            return (value >> 1) ^ -(value & 1), position + 2
    return read_signed_varint(raw, position)
