"""Sans-io reading of what the relay needs from a request: which answer it will get.

Kafka answers the requests of one connection in order (docs/protocol-notes.md §3.3), so
the relay keeps, per connection, the API and version of each request still to be
answered, and knows from them which answer to rewrite. A Produce with ``acks=0`` gets no
answer at all, so its ``acks`` is read too: the header, the transactional id (v3+) and
then ``acks`` (https://kafka.apache.org/protocol#The_Messages_Produce).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kshim.protocol.headers import REQUEST_HEADER_FIXED, parse_request_header
from kshim.protocol.primitives import DecodeError, read_unsigned_varint

PRODUCE_KEY = 0
FIRST_TRANSACTIONAL_PRODUCE = 3
# From Kafka's ProduceRequest.json ("flexibleVersions": "9+"); read here rather than from
# kio, which no longer carries v0-2.
FIRST_FLEXIBLE_PRODUCE = 9
INT16 = struct.Struct(">h")
PRODUCE_HEAD_BOUND = REQUEST_HEADER_FIXED.size + 2 * (2 + 32_767) + 16


class NeedMore(Exception):
    """More of the request's bytes are needed to read it."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A request relayed upstream, its answer still to come."""

    api_key: int
    api_version: int
    correlation_id: int


def read(payload: bytes | bytearray | memoryview) -> Pending | None:
    """The answer a request will get: None for a Produce with ``acks=0``. Raises NeedMore
    when ``payload`` is a prefix too short to tell (or, if it is the whole request, the
    request is broken)."""
    if len(payload) < REQUEST_HEADER_FIXED.size:
        raise NeedMore
    api_key, api_version, correlation_id, _ = REQUEST_HEADER_FIXED.unpack_from(payload, 0)
    pending = Pending(api_key, api_version, correlation_id)
    if api_key != PRODUCE_KEY:
        return pending
    # Copied no further than a header and a transactional id can reach (two int16-sized
    # strings and their lengths), whatever the size of the records behind them.
    head = bytes(payload[:PRODUCE_HEAD_BOUND])
    return pending if _produce_acks(head, api_version) != 0 else None


def _produce_acks(payload: bytes, version: int) -> int:
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
    return acks


def _skip_nullable_string(payload: bytes, position: int, flexible: bool) -> int:
    if flexible:
        length_plus_one, position = read_unsigned_varint(payload, position)
        return position + max(length_plus_one - 1, 0)
    if position + INT16.size > len(payload):
        raise NeedMore
    length: int = INT16.unpack_from(payload, position)[0]
    return position + INT16.size + max(length, 0)
