"""A hand-written Produce request decoder (v3-v11) that leaves record sets in the frame.

Produce requests carry nearly all the bytes a broker receives. kio's decoder
copies every record set into a new bytes object, after kshim's bounds walk
has read the request once already; this decoder checks each length against
the bytes left as it goes and returns the record sets as memoryviews of the
frame. Layout from ProduceRequest.json
(https://kafka.apache.org/protocol#The_Messages_Produce); v9 is the first
flexible version (compact strings, arrays and bytes, tagged fields). The test
suite checks it against kio's decoder on requests kio encodes, and that
truncated or garbled bodies raise DecodeError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kshim.protocol.primitives import DecodeError, read_tagged_fields, read_unsigned_varint

FIRST_FLEXIBLE_VERSION = 9
MIN_VERSION, MAX_VERSION = 3, 11
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class PartitionData:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class TopicData:
    name: str
    partition_data: tuple[PartitionData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicData, ...]


def decode_produce_request(version: int, frame: bytes | bytearray, offset: int) -> ProduceRequest:
    """Decodes the body starting at ``offset``; raises DecodeError on malformed input."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise DecodeError(f"Produce v{version} is not decoded here")
    reader = _Reader(memoryview(frame), offset, version >= FIRST_FLEXIBLE_VERSION)
    transactional_id = reader.nullable_string()
    acks, timeout_ms = reader.fixed(_ACKS_TIMEOUT)
    topics = []
    for _ in range(reader.array_length()):
        name = reader.nullable_string()
        if name is None:
            raise DecodeError("null topic name")
        partitions = []
        for _ in range(reader.array_length()):
            (index,) = reader.fixed(_INT32)
            partitions.append(PartitionData(index, reader.records()))
            reader.tags()
        topics.append(TopicData(name, tuple(partitions)))
        reader.tags()
    reader.tags()
    # Trailing bytes are ignored, as Kafka and kshim's kio path do.
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))


class _Reader:
    """A cursor over the body that refuses to read past its end."""

    def __init__(self, data: memoryview, position: int, flexible: bool) -> None:
        self.data = data
        self.position = position
        self.flexible = flexible

    def fixed(self, layout: struct.Struct) -> tuple[int, ...]:
        end = self._claim(layout.size)
        values = layout.unpack_from(self.data, self.position)
        self.position = end
        return values

    def _length(self, wide: struct.Struct) -> int:
        """A length prefix: -1 means null (compact: varint of length + 1, 0 = null)."""
        if self.flexible:
            raw, self.position = read_unsigned_varint(self.data, self.position)
            return raw - 1
        (length,) = self.fixed(wide)
        return int(length)

    def array_length(self) -> int:
        count = self._length(_INT32)
        if count < 0:
            raise DecodeError("null array where one is required")
        # Each element takes at least one byte: a larger count cannot be real.
        if count > len(self.data) - self.position:
            raise DecodeError(f"array of {count} elements runs past the end of the body")
        return count

    def nullable_string(self) -> str | None:
        length = self._length(_INT16)
        if length < 0:
            return None
        start, self.position = self.position, self._claim(length)
        try:
            return str(self.data[start : self.position], "utf-8")
        except UnicodeDecodeError as error:
            raise DecodeError(f"string is not UTF-8: {error}") from None

    def records(self) -> memoryview | None:
        length = self._length(_INT32)
        if length < 0:
            return None
        start, self.position = self.position, self._claim(length)
        return self.data[start : self.position]

    def tags(self) -> None:
        if self.flexible:
            self.position = read_tagged_fields(self.data, self.position)

    def _claim(self, size: int) -> int:
        end = self.position + size
        if end > len(self.data):
            raise DecodeError(f"field of {size} bytes runs past the end of the body")
        return end
