"""Helpers shared by the storage tests: a fake clock, producer batches, reads made bytes.

Everything here works on any ``interface.PartitionLog``, disk or in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from kshim.protocol.record_batch import BatchHeader, iter_batches, validate_produced
from kshim.protocol.records import BatchSpec, Record, build_batch, decode_records
from kshim.storage.interface import Chunk, LogConfig, PartitionLog, TopicPartition, chunk_bytes

TOPIC_PARTITION = TopicPartition("orders", 0)
UNBOUNDED = 1 << 40
DEFAULT_CONFIG = LogConfig()
NO_MEMTABLE = LogConfig(memtable_bytes=0)  # every durable batch is read back from disk
LARGE_MEMTABLE = LogConfig(memtable_bytes=1 << 30)


def producer_batch(
    count: int,
    timestamp: int = 1000,
    label: str = "v",
    attributes: int = 0,
    spec: BatchSpec | None = None,
) -> tuple[bytearray, BatchHeader]:
    """A validated producer batch of ``count`` records, one millisecond apart."""
    records = [
        Record(index, timestamp + index, b"k%d" % index, f"{label}-{index}".encode())
        for index in range(count)
    ]
    batch = bytearray(build_batch(records, spec or BatchSpec(attributes=attributes)))
    return batch, validate_produced(batch)


async def append_durable(
    log: PartitionLog, count: int, label: str = "v", timestamp: int = 1000
) -> int:
    batch, header = producer_batch(count, timestamp, label)
    base_offset = log.append(batch, header)
    await log.wait_durable(base_offset + count - 1)
    return base_offset


def materialize(chunk: Chunk) -> bytes:
    """The bytes of a read chunk: in-memory bytes, or a file region (closed once read)."""
    data = chunk_bytes(chunk)
    assert len(data) == len(chunk)
    return data


def joined(chunks: tuple[Chunk, ...]) -> bytes:
    return b"".join(materialize(chunk) for chunk in chunks)


@dataclass(frozen=True)
class Read:
    data: bytes
    end_offset: int


async def read_bytes(
    log: PartitionLog, offset: int, max_bytes: int = UNBOUNDED, upper_offset: int | None = None
) -> Read:
    """One ``PartitionLog.read``, its chunks materialized (and file regions closed)."""
    result = await log.read(offset, max_bytes, upper_offset)
    data = joined(result.chunks)
    assert result.size == len(data)
    return Read(data, result.end_offset)


def batch_bases(data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(data)]


async def read_everything(log: PartitionLog, offset: int | None = None) -> bytes:
    """Reads from ``offset`` (default: log start) to the high watermark, call after call."""
    position = log.log_start_offset if offset is None else offset
    data = b""
    while position < log.high_watermark:
        result = await read_bytes(log, position)
        assert result.end_offset > position
        data += result.data
        position = result.end_offset
    return data


def values_of(data: bytes) -> list[tuple[int, bytes | None]]:
    values = []
    for position, header in iter_batches(data):
        _, records = decode_records(data[position : position + header.size])
        values += [(record.offset, record.value) for record in records]
    return values
