"""The schedule topic's records: one per pending record of a ``T.delay`` partition.

The schedule is a compacted upstream topic (``__kshim_delay_schedule``). Its record key
names the pending record, ``T:p:offset`` (``:`` is not allowed in a Kafka topic name, so the
key parses back unambiguously); its value is the whole record, so that ``T.delay``'s own
retention never loses a pending one; a tombstone (null value) marks it delivered or
cancelled, and compaction drops both in time (Kafka's log compaction, "Kafka: The
Definitive Guide", chapter 6). The value is the due time (int64, epoch ms, big-endian), then
the record as kshim's broker keeps each pending record of its own schedule
(``kshim/protocol/packed_record.py``: its timestamp, key, value and headers).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from kshim.protocol.packed_record import pack_record, unpack_record
from kshim.protocol.primitives import DecodeError
from kshim.protocol.records import Header

SCHEDULE_TOPIC = "__kshim_delay_schedule"
_DUE = struct.Struct(">q")


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
    return _DUE.pack(record.due_ms) + pack_record(record)


def decode_entry(offset: int, data: bytes) -> PendingRecord:
    """The pending record at ``offset`` whose schedule value is ``data``; raises BadEntry."""
    try:
        (due_ms,) = _DUE.unpack_from(data, 0)
        record = unpack_record(data[_DUE.size :], offset)
    except (struct.error, DecodeError) as error:
        raise BadEntry(f"not a schedule value: {error}") from error
    return PendingRecord(offset, due_ms, record.timestamp, record.key, record.value, record.headers)
