"""The write-ahead log's records (write_ahead_log.py): how each is laid out, written and read
back intact.

Record layout, big-endian::

    crc        uint32  CRC-32C of the bytes from ``length`` to the end of the batch's own
                       CRC field; the batch's CRC covers the rest of the batch
    length     uint32  bytes after this field
    kind       int8    1: a batch appended to the partition, 2: the partition was deleted
    partition  int32
    name size  int16
    name       the topic's name, UTF-8
    batch      kind 1 only: the batch as stored (base offset and leader epoch stamped)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kshim.protocol.checksum import crc32c
from kshim.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CRC_OFFSET,
    CURRENT_MAGIC,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
)
from kshim.storage.interface import TopicPartition

CRC_FIELD = struct.Struct(">I")
LENGTH_FIELD = struct.Struct(">I")
PREFIX = struct.Struct(">bih")  # kind, partition, name size
RECORD_OVERHEAD = CRC_FIELD.size + LENGTH_FIELD.size  # before the counted bytes
_UINT32 = struct.Struct(">I")

BATCH_RECORD = 1
DELETE_RECORD = 2


def record_prefix(kind: int, topic_partition: TopicPartition) -> bytes:
    """The bytes after ``length`` and before the batch: what names the partition."""
    name = topic_partition.topic.encode("utf-8")
    return PREFIX.pack(kind, topic_partition.partition, len(name)) + name


def batch_record(prefix: bytes, batch: bytes) -> tuple[bytes, bytes]:
    """The two parts of one batch's record: its header (CRC, length, ``prefix``), then the
    batch itself, uncopied."""
    length = LENGTH_FIELD.pack(len(prefix) + len(batch))
    crc = crc32c(memoryview(batch)[:ATTRIBUTES_OFFSET], crc32c(length + prefix))
    return CRC_FIELD.pack(crc) + length + prefix, batch


def delete_record(topic_partition: TopicPartition) -> bytes:
    """The record saying the partition was deleted: its earlier records must not be
    replayed into a partition of the same name created later."""
    prefix = record_prefix(DELETE_RECORD, topic_partition)
    length = LENGTH_FIELD.pack(len(prefix))
    return CRC_FIELD.pack(crc32c(length + prefix)) + length + prefix


@dataclass(frozen=True, slots=True)
class WalRecord:
    """One intact record of a chunk read back: where it and its batch lie in the chunk."""

    kind: int
    topic_partition: TopicPartition
    start: int  # position of the record in the chunk
    batch_start: int  # position of the batch in the chunk
    batch_size: int


def records(chunk: bytes) -> Iterator[tuple[int, WalRecord]]:
    """(end, record) of each intact record at the start of ``chunk``, stopping at the
    first damaged or incomplete one."""
    view = memoryview(chunk)
    position = 0
    while len(chunk) - position >= RECORD_OVERHEAD + PREFIX.size:
        (crc,) = CRC_FIELD.unpack_from(chunk, position)
        (length,) = LENGTH_FIELD.unpack_from(chunk, position + CRC_FIELD.size)
        counted_start = position + CRC_FIELD.size
        end = position + RECORD_OVERHEAD + length
        kind, partition, name_size = PREFIX.unpack_from(chunk, position + RECORD_OVERHEAD)
        batch_start = position + RECORD_OVERHEAD + PREFIX.size + name_size
        if end > len(chunk) or batch_start > end or kind not in (BATCH_RECORD, DELETE_RECORD):
            return
        covered_end = batch_start + ATTRIBUTES_OFFSET if kind == BATCH_RECORD else batch_start
        if covered_end > end or crc32c(view[counted_start:covered_end]) != crc:
            return
        if kind == BATCH_RECORD and not _intact_batch(view[batch_start:end]):
            return
        try:
            topic = bytes(view[batch_start - name_size : batch_start]).decode("utf-8")
        except UnicodeDecodeError:
            return
        topic_partition = TopicPartition(topic, partition)
        yield end, WalRecord(kind, topic_partition, position, batch_start, end - batch_start)
        position = end


def _intact_batch(batch: memoryview) -> bool:
    if len(batch) < BATCH_OVERHEAD or batch[MAGIC_OFFSET] != CURRENT_MAGIC:
        return False
    (length,) = _UINT32.unpack_from(batch, LENGTH_OFFSET)
    (crc,) = _UINT32.unpack_from(batch, CRC_OFFSET)
    if LOG_OVERHEAD + length != len(batch):
        return False
    return bool(crc32c(batch[ATTRIBUTES_OFFSET:]) == crc)


def record_size(chunk: bytes) -> int | None:
    """The full size of the record starting ``chunk``, read from its length field."""
    if len(chunk) < RECORD_OVERHEAD:
        return None
    (length,) = LENGTH_FIELD.unpack_from(chunk, CRC_FIELD.size)
    return int(RECORD_OVERHEAD + length)
