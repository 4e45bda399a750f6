"""The storage interface, in Kafka's words.

The broker sees a partition as a log with a log start offset, a log end
offset (next offset to assign) and a high watermark: the end of what is
durable and therefore visible to consumers. Reads return stored batch bytes,
never decoded records.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches read from a log; ``chunks`` are ready to be sent as they are."""

    chunks: tuple[bytes | memoryview, ...]
    size: int
    end_offset: int  # the offset after the last batch returned (or the fetch offset)


EMPTY_READ_SIZE = 0


class OffsetOutOfRange(Exception):
    """A read or seek outside [log start offset, high watermark]."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The per-partition settings the store honours (Kafka topic config names in comments)."""

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1: keep forever)
    retention_bytes: int = -1  # retention.bytes (-1: no size limit)
    flush_messages: int = 1  # flush.messages: 1 = fsync before every acknowledgement
    flush_ms: int = 0  # flush.ms: upper bound on unsynced time when flush.messages > 1
    memtable_bytes: int = 16 << 20  # kshim.memtable.bytes: recent batches served from memory
