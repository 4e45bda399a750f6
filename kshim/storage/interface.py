"""The storage interface, in Kafka's words.

The broker sees a partition as a log with a log start offset, a log end
offset (next offset to assign) and a high watermark: the end of what is
durable and therefore visible to consumers. Reads return stored batch bytes,
never decoded records.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class FileRegion:
    """A byte range of a segment file, sent with sendfile (zero-copy) by the server.

    Holds its own duplicate descriptor, so the segment may be deleted by
    retention meanwhile; the receiver must ``close()`` it once sent or dropped.
    """

    __slots__ = ("_file", "descriptor", "length", "position")

    def __init__(self, descriptor: int, position: int, length: int) -> None:
        self.descriptor = descriptor
        self.position = position
        self.length = length
        self._file: io.FileIO | None = None

    def __len__(self) -> int:
        return self.length

    def as_file(self) -> io.FileIO:
        """A file object over the descriptor, as ``loop.sendfile`` wants."""
        if self._file is None:
            self._file = io.FileIO(self.descriptor, "rb", closefd=True)
        return self._file

    def read_from(self, skip: int) -> bytes:
        """Reads the range's bytes after the first ``skip`` into memory (blocking)."""
        return os.pread(self.descriptor, self.length - skip, self.position + skip)

    def read_bytes(self) -> bytes:
        """Reads the range into memory and closes the region (blocking: tools and tests)."""
        try:
            return self.read_from(0)
        finally:
            self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        elif self.descriptor >= 0:
            os.close(self.descriptor)
        self.descriptor = -1


Chunk = bytes | memoryview | FileRegion


def chunk_bytes(chunk: Chunk) -> bytes:
    """The bytes of a read chunk, reading (and closing) a file region: blocking."""
    return chunk.read_bytes() if isinstance(chunk, FileRegion) else bytes(chunk)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches read from a log; ``chunks`` are ready to be sent as they are."""

    chunks: tuple[Chunk, ...]
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
    memtable_bytes: int = 1 << 20  # kshim.memtable.bytes: recent batches served from memory
    # kshim.write.inline.max.us: flush rounds whose write and fsync take less than this
    # (moving average) run on the event loop instead of a worker thread; 0 = always a thread.
    inline_write_max_us: int = 5000
