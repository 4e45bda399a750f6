"""Sample records, expected results and bounded waits shared by the client end-to-end tests.

Every client test produces the same shape of data so that a difference between clients
points at the broker path that client uses, not at the data. Records carry explicit,
strictly increasing timestamps so that ListOffsets by timestamp has one exact answer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# Codec names as every client spells them ("none" is None in kafka-python and aiokafka).
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

# An hour before this process started, on a whole second: within every retention period.
# Records stamped years ago are what time-based retention deletes, and Apache Kafka (since
# KIP-32) rolls and deletes even the active segment once its newest timestamp is older than
# log.retention.ms, whenever its 5-minute retention check comes round in the middle of a test.
BASE_TIMESTAMP_MS = (int(time.time()) - 3600) * 1000
TIMESTAMP_STEP_MS = 1_000
# Long enough for a cold client to connect and fetch metadata; short enough to fail fast.
WAIT_S = 20.0
# How long a client may linger, so that each half of the sample forms one multi-record batch.
LINGER_MS = 50

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class SampleRecord:
    """A record as produced, and (with ``offset``) as a consumer must return it."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """What a consumer returned, normalised across clients."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def unique_topic(label: str) -> str:
    """Returns a topic name no other test uses, so tests can share one broker."""
    return f"e2e-{label}-{uuid.uuid4().hex[:12]}"


def timestamp_of(index: int) -> int:
    """The create time given to the ``index``-th sample record."""
    return BASE_TIMESTAMP_MS + index * TIMESTAMP_STEP_MS


def sample_records(
    count: int = 12, null_header_values: bool = False, null_key_and_value: bool = False
) -> list[SampleRecord]:
    """Returns ``count`` records that exercise null and empty keys, values and headers.

    kafka-python and aiokafka refuse a record whose key and value are both null, and
    refuse null header values; confluent-kafka accepts both, so those cases are opt-in.
    """
    records = []
    for index in range(count):
        kind = index % 4
        key: bytes | None = f"key-{index}".encode()
        value: bytes | None = f"value-{index} ".encode() * 40  # compressible
        headers: Headers = ()
        if kind == 0:
            headers = (("trace", f"t-{index}".encode()), ("trace", b""))  # repeated key, empty
        elif kind == 1:
            value = None  # a tombstone
        elif kind == 2:
            key = None
            headers = (("binary", bytes(range(256))),)
        else:
            key, value = b"", b""  # empty, which is not null
            headers = (("ünïcode-ключ", b"\x00\xff"),)
        if null_header_values and index == 5:
            headers = (("nullable", None), ("after-null", b"x"))
        if null_key_and_value and index == 7:
            key, value = None, None
        records.append(SampleRecord(key, value, headers, timestamp_of(index)))
    return records


def expected_records(
    records: Sequence[SampleRecord], first_offset: int = 0
) -> list[ConsumedRecord]:
    """The records a consumer must return, at consecutive offsets from ``first_offset``."""
    return [
        ConsumedRecord(first_offset + index, r.key, r.value, r.headers, r.timestamp_ms)
        for index, r in enumerate(records)
    ]


def normalise_headers(headers: Iterable[tuple[str, Any]] | None) -> Headers:
    """Client header lists (or confluent's None for no headers) as a tuple of pairs."""
    return tuple((name, value) for name, value in headers or ())


def to_bytes(data: bytes | bytearray | memoryview | None) -> bytes | None:
    """Client payloads as plain bytes, keeping null as None."""
    return None if data is None else bytes(data)


class Deadline:
    """A monotonic-clock deadline for bounded poll loops."""

    def __init__(self, seconds: float = WAIT_S) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining_s(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def poll_timeout_s(self, cap_s: float = 0.5) -> float:
        """A single poll's timeout: at most ``cap_s``, never past the deadline."""
        return min(cap_s, self.remaining_s())
