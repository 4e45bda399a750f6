"""The schedule topic's records: one per pending record of a ``T.delay`` partition.

The schedule is a compacted upstream topic (``__kshim_delay_schedule``). Its record key
names the pending record, ``T:p:offset`` (``:`` is not allowed in a Kafka topic name, so the
key parses back unambiguously); its value is the whole record, so that ``T.delay``'s own
retention never loses a pending one; a tombstone (null value) marks it delivered or
cancelled, and compaction drops both in time (Kafka's log compaction, "Kafka: The
Definitive Guide", chapter 6). The value's layout, big-endian as Kafka's own:

    due_ms        int64   when the record is delivered (epoch ms)
    timestamp     int64   the record's own timestamp, kept on delivery
    key_length    int32   -1 for a null key
    key           bytes
    value_length  int32   -1 for a null value
    value         bytes
    header_count  int32
    headers       header_count times: name_length int16, name (UTF-8),
                                      value_length int32 (-1: null), value
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from kshim.protocol.records import Header

SCHEDULE_TOPIC = "__kshim_delay_schedule"
_TIMES = struct.Struct(">qq")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


class BadEntry(ValueError):
    """A schedule record that is not one this module wrote."""


@dataclass(frozen=True, slots=True)
class PendingRecord:
    """A record of ``T.delay``-p waiting for its due time."""

    offset: int  # in T.delay-p
    due_ms: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def entry_key(topic: str, partition: int, offset: int) -> bytes:
    """The schedule record key of ``topic``-``partition`` (a ``T.delay``) at ``offset``."""
    return f"{topic}:{partition}:{offset}".encode()


def parse_entry_key(key: bytes) -> tuple[str, int, int]:
    """(topic, partition, offset) of a schedule record key; raises BadEntry."""
    try:
        topic, partition, offset = key.decode().rsplit(":", 2)
        return topic, int(partition), int(offset)
    except ValueError as error:
        raise BadEntry(f"not a schedule key: {key!r}") from error


def schedule_partition(topic: str, partition: int, partitions: int) -> int:
    """The schedule partition holding ``topic``-``partition``'s entries: all of them in
    one, so that a takeover reads that one only."""
    return zlib.crc32(f"{topic}:{partition}".encode()) % partitions


def encode_entry(record: PendingRecord) -> bytes:
    parts = [_TIMES.pack(record.due_ms, record.timestamp)]
    _put_bytes(parts, record.key)
    _put_bytes(parts, record.value)
    parts.append(_INT32.pack(len(record.headers)))
    for name, value in record.headers:
        encoded = name.encode()
        parts += [_INT16.pack(len(encoded)), encoded]
        _put_bytes(parts, value)
    return b"".join(parts)


def decode_entry(offset: int, data: bytes) -> PendingRecord:
    """The pending record at ``offset`` whose schedule value is ``data``; raises BadEntry."""
    try:
        due_ms, timestamp = _TIMES.unpack_from(data, 0)
        key, position = _take_bytes(data, _TIMES.size)
        value, position = _take_bytes(data, position)
        (count,) = _INT32.unpack_from(data, position)
        position += _INT32.size
        headers: list[Header] = []
        for _ in range(count):
            (name_length,) = _INT16.unpack_from(data, position)
            position += _INT16.size
            name = data[position : position + name_length].decode()
            header_value, position = _take_bytes(data, position + name_length)
            headers.append((name, header_value))
    except (struct.error, UnicodeDecodeError) as error:
        raise BadEntry(f"not a schedule value: {error}") from error
    return PendingRecord(offset, due_ms, timestamp, key, value, tuple(headers))


def _put_bytes(parts: list[bytes], data: bytes | None) -> None:
    if data is None:
        parts.append(_INT32.pack(-1))
    else:
        parts += [_INT32.pack(len(data)), data]


def _take_bytes(data: bytes, position: int) -> tuple[bytes | None, int]:
    (length,) = _INT32.unpack_from(data, position)
    position += _INT32.size
    if length < 0:
        return None, position
    if position + length > len(data):
        raise struct.error("a length past the end")
    return data[position : position + length], position + length
