"""A hand-written Metadata request decoder (v0-v12) that keeps the topic names as strings.

A Metadata request may name thousands of topics: librdkafka asks for every topic it
produces to in one request (~36 KB of names at 1,500 topics). kio's reader made a
dataclass per topic and the typed request another, and those objects, alive while the
handler ran, made the garbage collector promote them and then walk the whole broker's
heap: at 10,000 names the collections cost more than the answer. This decoder reads the
names into one tuple of strings, which the collector does not track.

It refuses what kio's path refuses (``bounds.py`` and kio's reader): a length or count
running past the body, a null where the version forbids one, a varint longer than five
bytes, a boolean other than 0 or 1, a name that is not UTF-8. Trailing bytes are ignored,
as Kafka does: librdkafka's all-topics request carries three stray bytes
(confluentinc/librdkafka#5049). The test suite checks it against kio's path on valid,
truncated and garbled requests of every served version.

Layout from MetadataRequest.json (https://kafka.apache.org/protocol#The_Messages_Metadata),
``[x]`` an array, ``?`` nullable, ``(vN+)`` present from version N::

    request  topics [topic] (nullable v1+: null asks for every topic; v0 asks for every
             topic with an empty array), allow_auto_topic_creation bool (v4+; KIP-204),
             include_cluster_authorized_operations bool (v8-v10; KIP-430, gone in v11:
             KIP-700), include_topic_authorized_operations bool (v8+)
    topic    topic_id uuid (v10+; KIP-516), name string (nullable v10+)

Kafka 3.9 looks topics up by id from v12 only; a v10 or v11 request naming an id or a
null name is answered INVALID_REQUEST (api/records/metadata.py), so both are kept here.

v9 is the first flexible version (KIP-482): compact strings and arrays (length + 1 as an
unsigned varint, 0 for null) and a tagged-field section closing every structure; the
request defines no tagged fields, so every tag is skipped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kshim.protocol.bounds import read_varint
from kshim.protocol.primitives import DecodeError

MIN_VERSION, MAX_VERSION = 0, 12
FIRST_NULLABLE_TOPICS = 1
FIRST_WITH_AUTO_CREATION = 4
FIRST_WITH_AUTHORIZED_OPERATIONS = 8
FIRST_FLEXIBLE_VERSION = 9
FIRST_WITH_TOPIC_ID = 10
LAST_WITH_CLUSTER_AUTHORIZED_OPERATIONS = 10
TOPIC_ID_SIZE = 16
ZERO_TOPIC_ID = bytes(TOPIC_ID_SIZE)  # Kafka's Uuid.ZERO_UUID: no id given
NULL_LENGTH = -1
TAGGED_FIELD_MINIMUM = 2  # one byte of tag and one of size at the least
SMALLEST_NAME_AND_TAGS = 2
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_BOOLEANS = {0: False, 1: True}


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    """What a Metadata request asks, in any served version.

    ``topics`` holds the names asked for, in order (None for a topic asked for by id
    alone, v10+), or is None for every topic (v1+; v0 asks for every topic with an empty
    list). ``topic_ids`` holds the 16 bytes of each topic's id (v10+), aligned with
    ``topics``, only when one of them is not zero: nearly every request asks by name with
    zero ids, and then it is empty. Fields a version lacks hold Kafka's defaults (topics
    were always auto-created before v4).
    """

    topics: tuple[str | None, ...] | None
    allow_auto_topic_creation: bool = True
    include_cluster_authorized_operations: bool = False
    include_topic_authorized_operations: bool = False
    topic_ids: tuple[bytes, ...] = ()


def decode_metadata_request(version: int, frame: bytes | bytearray, offset: int) -> MetadataRequest:
    """Decodes the body starting at ``offset``; raises DecodeError on malformed input."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise DecodeError(f"Metadata v{version} is not decoded here")
    reader = _Reader(memoryview(frame), offset, version >= FIRST_FLEXIBLE_VERSION)
    topics, topic_ids = reader.topics(version)
    allow_auto_topic_creation = True
    include_cluster = include_topic = False
    if version >= FIRST_WITH_AUTO_CREATION:
        allow_auto_topic_creation = reader.boolean()
    if FIRST_WITH_AUTHORIZED_OPERATIONS <= version <= LAST_WITH_CLUSTER_AUTHORIZED_OPERATIONS:
        include_cluster = reader.boolean()
    if version >= FIRST_WITH_AUTHORIZED_OPERATIONS:
        include_topic = reader.boolean()
    reader.tags()
    return MetadataRequest(
        topics, allow_auto_topic_creation, include_cluster, include_topic, topic_ids
    )


class _Reader:
    """A cursor over the body that refuses to read past its end."""

    def __init__(self, data: memoryview, position: int, flexible: bool) -> None:
        self.data = data
        self.position = position
        self.end = len(data)
        self.flexible = flexible

    def topics(self, version: int) -> tuple[tuple[str | None, ...] | None, tuple[bytes, ...]]:
        """The names asked for and, when one is not zero, every topic's id."""
        with_id = version >= FIRST_WITH_TOPIC_ID
        count = self._length(_INT32)
        if count == NULL_LENGTH:
            if version < FIRST_NULLABLE_TOPICS:
                raise DecodeError("Metadata v0 topics: null in a non-nullable field")
            return None, ()
        # Each topic takes at least its id and two bytes (an int16 name length, or a
        # compact one and an empty tagged-field section): a larger count cannot be real
        # (Kafka's generated readers check the same, as bounds.py does).
        smallest = (TOPIC_ID_SIZE if with_id else 0) + SMALLEST_NAME_AND_TAGS
        if count * smallest > self.end - self.position:
            raise DecodeError(f"Metadata topics: {count} cannot fit in the bytes left")
        names, id_positions = [], []
        any_id = False
        for _ in range(count):
            if with_id:
                start, self.position = self.position, self._claim(TOPIC_ID_SIZE)
                any_id = any_id or self.data[start : self.position] != ZERO_TOPIC_ID
                id_positions.append(start)
            names.append(self.string(nullable=with_id))
            self.tags()
        if not any_id:  # the usual request: no id is copied
            return tuple(names), ()
        ids = (bytes(self.data[start : start + TOPIC_ID_SIZE]) for start in id_positions)
        return tuple(names), tuple(ids)

    def string(self, nullable: bool) -> str | None:
        length = self._length(_INT16)
        if length == NULL_LENGTH:
            if nullable:
                return None
            raise DecodeError("Metadata topic name: null in a non-nullable field")
        start, self.position = self.position, self._claim(length)
        try:
            return str(self.data[start : self.position], "utf-8")
        except UnicodeDecodeError as error:
            raise DecodeError(f"Metadata topic name is not UTF-8: {error}") from None

    def boolean(self) -> bool:
        end = self._claim(1)
        value = _BOOLEANS.get(self.data[self.position])
        if value is None:
            raise DecodeError(f"invalid boolean value {self.data[self.position]}")
        self.position = end
        return value

    def tags(self) -> None:
        """Skips a tagged-field section (flexible versions only)."""
        if not self.flexible:
            return
        if self.position < self.end and self.data[self.position] == 0:
            self.position += 1  # nearly every section is empty: a single zero count
            return
        count = self._varint()
        if count * TAGGED_FIELD_MINIMUM > self.end - self.position:
            raise DecodeError(f"{count} tagged fields cannot fit in the bytes left")
        for _ in range(count):
            self._varint()  # the tag: none is defined for Metadata requests
            size = self._varint()
            self.position = self._claim(size)

    def _length(self, legacy: struct.Struct) -> int:
        """A length or count: -1 means null (compact: varint of length + 1, 0 = null).
        Raises DecodeError for any other negative one."""
        if self.flexible:
            return self._varint() - 1
        end = self._claim(legacy.size)
        (length,) = legacy.unpack_from(self.data, self.position)
        self.position = end
        if length < NULL_LENGTH:
            raise DecodeError(f"negative length {length}")
        return int(length)

    def _varint(self) -> int:
        value, self.position = read_varint("Metadata request", self.data, self.position, self.end)
        return value

    def _claim(self, size: int) -> int:
        end = self.position + size
        if end > self.end:
            raise DecodeError(f"field of {size} bytes runs past the end of the body")
        return end
