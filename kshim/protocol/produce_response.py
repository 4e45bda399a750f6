"""A hand-written Produce response encoder (v3-v11).

Every acknowledged batch gets one of these, so it skips kio's generic encoder
(a dict turned into dataclasses, then walked field by field): packing a few
integers per partition directly costs a fraction of that. Layout from
ProduceResponse.json (https://kafka.apache.org/protocol#The_Messages_Produce);
v9 is the first flexible version. kshim never sets the v10+ tagged fields
(current leader, node endpoints: it is the only broker), so their sections are
empty. The test suite checks the output byte for byte against kio's encoder.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kshim.protocol.primitives import write_array_length, write_string

FIRST_FLEXIBLE_VERSION = 9
MIN_VERSION, MAX_VERSION = 3, 11  # v0-v2 are advertised but never served (versions.py)
NO_TAGGED_FIELDS = b"\x00"
_INDEX_OFFSET_TIME = struct.Struct(">ihqq")  # v2+ fields: every served version has them
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """One partition's outcome (record_errors are never reported, so always empty)."""

    index: int
    error_code: int
    base_offset: int
    log_append_time: int = NO_TIMESTAMP
    log_start_offset: int = -1
    error_message: str | None = None


# One topic's answers: its name and each of its partitions' outcome.
TopicAnswers = tuple[str, Sequence[PartitionAnswer]]


def encode_produce_response(
    version: int, topics: Sequence[TopicAnswers], throttle_ms: int = 0
) -> bytes:
    """The response body (after the response header) for ``version``."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce v{version} is not encoded here")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(write_array_length(len(topics), flexible))
    for name, partitions in topics:
        out += write_string(name, flexible)
        out += write_array_length(len(partitions), flexible)
        for partition in partitions:
            out += _partition(version, partition, flexible)
        if flexible:
            out += NO_TAGGED_FIELDS
    out += _INT32.pack(throttle_ms)
    if flexible:
        out += NO_TAGGED_FIELDS
    return bytes(out)


def _partition(version: int, partition: PartitionAnswer, flexible: bool) -> bytes:
    out = _INDEX_OFFSET_TIME.pack(
        partition.index, partition.error_code, partition.base_offset, partition.log_append_time
    )
    if version >= 5:
        out += _INT64.pack(partition.log_start_offset)
    if version >= 8:
        out += write_array_length(0, flexible)  # record_errors
        out += write_string(partition.error_message, flexible)
    if flexible:
        out += NO_TAGGED_FIELDS
    return out
