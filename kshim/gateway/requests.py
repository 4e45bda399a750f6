"""Sans-io reading of what the relay needs from a request: which answer it will get.

Kafka answers the requests of one connection in order (docs/protocol-notes.md §3.3), so
the relay keeps, per connection, the API and version of each request still to be
answered, and knows from them which answer to rewrite. A Produce with ``acks=0`` gets no
answer at all, so its ``acks`` is read too: the header, the transactional id (v3+) and
then ``acks`` (https://kafka.apache.org/protocol#The_Messages_Produce).

A Produce naming a delay companion (``T.delay``, broker/delay/naming.py) must have its
records checked before they go upstream, so ``inspect`` also reads a Produce's topic names,
skipping each partition's records by their length: the last topic's partitions are not
read at all, so a one-topic Produce is told from its first bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from kshim.broker.delay.naming import DELAY_SUFFIX, reserved_for_delay
from kshim.broker.full_view.naming import VIEW_SUFFIX, reserved_for_view
from kshim.protocol.headers import REQUEST_HEADER_FIXED, parse_request_header
from kshim.protocol.primitives import DecodeError, read_tagged_fields, read_unsigned_varint

PRODUCE_KEY = 0
FIRST_TRANSACTIONAL_PRODUCE = 3
# From Kafka's ProduceRequest.json ("flexibleVersions": "9+"); read here rather than from
# kio, which no longer carries v0-2.
FIRST_FLEXIBLE_PRODUCE = 9
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
TIMEOUT_LENGTH = INT32.size
PARTITION_INDEX_LENGTH = INT32.size
SUFFIX = DELAY_SUFFIX.encode()
VIEW_MARK = VIEW_SUFFIX.encode()
PRODUCE_HEAD_BOUND = REQUEST_HEADER_FIXED.size + 2 * (2 + 32_767) + 16


class NeedMore(Exception):
    """More of the request's bytes are needed to read it."""


class Refusal(NamedTuple):
    """A partition of a Produce the gateway refused itself, as Kafka would answer it."""

    topic: str
    partition: int
    error_code: int
    message: str


@dataclass(frozen=True, slots=True)
class Pending:
    """A request relayed upstream, its answer still to come."""

    api_key: int
    api_version: int
    correlation_id: int
    # A Produce's partitions the gateway refused itself and took out of the request sent
    # upstream, their answers merged into the upstream's (delay_screen.py).
    refused: tuple[Refusal, ...] = ()
    lists_all: bool = False  # a Metadata request for every topic (views are left out)


def read(payload: bytes | bytearray | memoryview) -> Pending | None:
    """The answer a request will get: None for a Produce with ``acks=0``. Raises NeedMore
    when ``payload`` is a prefix too short to tell (or, if it is the whole request, the
    request is broken)."""
    pending, _ = _read(payload)
    return pending


def inspect(
    payload: bytes | bytearray | memoryview, views: bool = False
) -> tuple[Pending | None, bool]:
    """``read``'s answer, and whether the request is a Produce naming a delay companion (or,
    with ``views``, a full-data view). Raises NeedMore as ``read`` does, and when a topic
    name lies past ``payload``."""
    pending, after_acks = _read(payload)
    if after_acks < 0:
        return pending, False
    flexible = REQUEST_HEADER_FIXED.unpack_from(payload, 0)[1] >= FIRST_FLEXIBLE_PRODUCE
    try:
        return pending, _names_delay(payload, after_acks + TIMEOUT_LENGTH, flexible, views)
    except DecodeError as error:  # a varint running past the end
        raise NeedMore from error


def _read(payload: bytes | bytearray | memoryview) -> tuple[Pending | None, int]:
    """``read``'s answer, and for a Produce where its ``acks`` ends (else -1)."""
    if len(payload) < REQUEST_HEADER_FIXED.size:
        raise NeedMore
    api_key, api_version, correlation_id, _ = REQUEST_HEADER_FIXED.unpack_from(payload, 0)
    pending = Pending(api_key, api_version, correlation_id)
    if api_key != PRODUCE_KEY:
        return pending, -1
    # Copied no further than a header and a transactional id can reach (two int16-sized
    # strings and their lengths), whatever the size of the records behind them.
    head = bytes(payload[:PRODUCE_HEAD_BOUND])
    acks, position = _produce_acks(head, api_version)
    return (pending if acks != 0 else None), position + INT16.size


def _produce_acks(payload: bytes, version: int) -> tuple[int, int]:
    """A Produce's ``acks`` and where it starts."""
    flexible = version >= FIRST_FLEXIBLE_PRODUCE
    try:
        _, position = parse_request_header(payload, flexible)
        if version >= FIRST_TRANSACTIONAL_PRODUCE:
            position = _skip_nullable_string(payload, position, flexible)
        if position + INT16.size > len(payload):
            raise NeedMore
        acks: int = INT16.unpack_from(payload, position)[0]
    except DecodeError as error:
        raise NeedMore from error
    return acks, position


def _names_delay(
    payload: bytes | bytearray | memoryview, position: int, flexible: bool, views: bool
) -> bool:
    """Whether a topic of the Produce whose topics array starts at ``position`` is a
    delay companion (or a view); raises NeedMore (or DecodeError) when a name lies past
    ``payload``."""
    count, position = _length(payload, position, flexible, INT32)
    for remaining in range(count - 1, -1, -1):
        length, position = _length(payload, position, flexible, INT16)
        end = position + length
        if length < 0 or end > len(payload):
            raise NeedMore
        # The bytes first: a name is decoded only when it ends in ".delay" (or ".full").
        if _screened_name(payload, position, end, views):
            return True
        if not remaining:  # the last topic: its partitions name nothing
            return False
        position = _skip_partitions(payload, end, flexible)
    return False


def _screened_name(
    payload: bytes | bytearray | memoryview, start: int, end: int, views: bool
) -> bool:
    ending = payload[end - len(SUFFIX) : end]
    if ending == SUFFIX:
        return reserved_for_delay(str(payload[start:end], "utf-8", "replace"))
    if views and ending[-len(VIEW_MARK) :] == VIEW_MARK:
        return reserved_for_view(str(payload[start:end], "utf-8", "replace"))
    return False


def _skip_partitions(payload: bytes | bytearray | memoryview, position: int, flexible: bool) -> int:
    """Where the topic whose partitions array starts at ``position`` ends."""
    count, position = _length(payload, position, flexible, INT32)
    for _ in range(count):
        position += PARTITION_INDEX_LENGTH
        length, position = _length(payload, position, flexible, INT32)
        position += max(length, 0)  # -1: null records
        if flexible:
            position = _skip_tags(payload, position)
    if flexible:
        position = _skip_tags(payload, position)
    if position > len(payload):
        raise NeedMore
    return position


def _skip_tags(payload: bytes | bytearray | memoryview, position: int) -> int:
    # Clients send no tagged field in a Produce: one zero byte, read without a varint.
    if position < len(payload) and not payload[position]:
        return position + 1
    return read_tagged_fields(payload, position)


def _length(
    payload: bytes | bytearray | memoryview, position: int, flexible: bool, wide: struct.Struct
) -> tuple[int, int]:
    """A length (or count) prefix and where it ends: ``wide`` (int16 or int32) in the
    classic versions, an unsigned varint of length + 1 in the flexible ones; -1 is null."""
    if flexible:
        length_plus_one, position = read_unsigned_varint(payload, position)
        return length_plus_one - 1, position
    if position + wide.size > len(payload):
        raise NeedMore
    length: int = wide.unpack_from(payload, position)[0]
    return length, position + wide.size


def _skip_nullable_string(payload: bytes, position: int, flexible: bool) -> int:
    if flexible:
        length_plus_one, position = read_unsigned_varint(payload, position)
        return position + max(length_plus_one - 1, 0)
    if position + INT16.size > len(payload):
        raise NeedMore
    length: int = INT16.unpack_from(payload, position)[0]
    return position + INT16.size + max(length, 0)
