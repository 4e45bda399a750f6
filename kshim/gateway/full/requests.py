"""Sans-io: which requests a gateway serving ``T.full`` must look at, and how.

A view ``T.full`` exists on the cluster as an empty placeholder topic (ownership.py), so
most requests naming it are relayed as any other. Three kinds are not:

- Fetch, ListOffsets and OffsetForLeaderEpoch of a view's partitions are answered by the
  gateway from its index of ``T`` (answers.py): the placeholder holds nothing.
- A Metadata request naming ``T.full`` first has the placeholder made, with ``T``'s
  partition count, where it is missing (Kafka would otherwise answer
  UNKNOWN_TOPIC_OR_PARTITION, or auto-create it with its own partition count), and its
  answer names the gateway owning each partition as its leader (metadata.py).
- A Metadata request for every topic has the views left out of its answer, as kshim's broker
  leaves them out (docs/full-data-view.md: named, not listed).

A request is first looked for the bytes ``.full`` (names are carried as UTF-8, and Fetch
is offered up to v12, the last version naming topics rather than giving their ids,
KIP-516), so the common request is passed on unread.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kshim.broker.full_view.naming import VIEW_SUFFIX, source_name
from kshim.protocol import codec
from kshim.protocol.headers import REQUEST_HEADER_FIXED, parse_request_header
from kshim.protocol.primitives import DecodeError, read_unsigned_varint

FETCH_KEY = 1
LIST_OFFSETS_KEY = 2
METADATA_KEY = 3
OFFSET_FOR_LEADER_EPOCH_KEY = 23
ANSWERED_HERE = frozenset({FETCH_KEY, LIST_OFFSETS_KEY, OFFSET_FOR_LEADER_EPOCH_KEY})
LOOKED_AT = ANSWERED_HERE | {METADATA_KEY}
MARKER = VIEW_SUFFIX.encode()
# The last Fetch version naming its topics (v13 gives topic ids, KIP-516).
MAX_FETCH_VERSION = 12
FIRST_FLEXIBLE_METADATA = 9
# Not offered where views are served: DescribeTopicPartitions (KIP-966) would tell a
# partition's leader, and that a view nobody named yet does not exist, without a Metadata
# request; Kafka's admin client (Spark's connector's) then describes topics by Metadata.
DESCRIBE_TOPIC_PARTITIONS_KEY = 75
VIEWS_HIDDEN = frozenset({DESCRIBE_TOPIC_PARTITIONS_KEY})
INT32 = struct.Struct(">i")


class Route(enum.Enum):
    RELAY = enum.auto()  # relayed as it is
    MORE = enum.auto()  # the whole request is needed to tell
    ANSWER = enum.auto()  # answered by the gateway
    PREPARE = enum.auto()  # relayed once the views it names have their placeholders


# A whole request decoded: (api key, version, correlation id, kio's request).
Decoded = tuple[int, int, int, object]


@dataclass(frozen=True, slots=True)
class Routing:
    route: Route
    lists_all: bool = False  # a Metadata request for every topic
    # The request, decoded once here, for what answers or prepares it (ANSWER, PREPARE).
    request: Decoded | None = None


RELAY = Routing(Route.RELAY)
MORE = Routing(Route.MORE)


def route(payload: bytes | memoryview, size: int) -> Routing:
    """Where the request whose first bytes are ``payload`` (``size`` in all) goes."""
    if len(payload) < REQUEST_HEADER_FIXED.size:
        return MORE
    api_key = REQUEST_HEADER_FIXED.unpack_from(payload, 0)[0]
    if api_key not in LOOKED_AT:
        return RELAY
    if len(payload) < size:
        return MORE  # small requests: looked at whole
    if api_key == METADATA_KEY:
        return _metadata_route(bytes(payload))
    if MARKER not in payload:
        return RELAY
    request = _decoded_or_none(bytes(payload))
    if request is None or not any(source_name(n) for n in topic_names(request)):
        return RELAY  # a broken request is the cluster's to refuse
    return Routing(Route.ANSWER, request=request)


def _metadata_route(payload: bytes) -> Routing:
    if MARKER not in payload:
        return Routing(Route.RELAY, lists_all=_lists_all(payload))
    request = _decoded_or_none(payload)
    names = [] if request is None else topic_names(request)
    if not names:
        return Routing(Route.RELAY, lists_all=True)
    if not any(source_name(n) for n in names):
        return RELAY
    return Routing(Route.PREPARE, request=request)


def _lists_all(payload: bytes) -> bool:
    """Whether a Metadata request asks for every topic: a null topics array (v1+), or an
    empty one in v0."""
    _, version, _, _ = REQUEST_HEADER_FIXED.unpack_from(payload, 0)
    flexible = version >= FIRST_FLEXIBLE_METADATA
    try:
        _, position = parse_request_header(payload, flexible)
        if flexible:
            count_plus_one, _ = read_unsigned_varint(payload, position)
            return count_plus_one == 0
    except DecodeError:
        return False  # broken: the cluster will say so
    if position + INT32.size > len(payload):
        return False
    count: int = INT32.unpack_from(payload, position)[0]
    return count < 0 or (version == 0 and count == 0)


def decoded(payload: bytes) -> Decoded:
    """A whole request, decoded; raises DecodeError."""
    api_key, version, correlation_id, _ = REQUEST_HEADER_FIXED.unpack_from(payload, 0)
    _, position = parse_request_header(payload, codec.is_flexible(api_key, version))
    request = codec.decode_request(api_key, version, payload, position)
    return api_key, version, correlation_id, request


def _decoded_or_none(payload: bytes) -> Decoded | None:
    try:
        return decoded(payload)
    except (DecodeError, KeyError, ValueError):
        return None


def topic_names(request: Decoded) -> list[str]:
    """The topic names a decoded Fetch, ListOffsets, OffsetForLeaderEpoch or Metadata request
    carries (none for a Metadata request for every topic)."""
    # Fetch and OffsetForLeaderEpoch call the field ``topic``, the others ``name``.
    topics: Sequence[object] = getattr(request[3], "topics", None) or ()
    names = (getattr(t, "topic", None) or getattr(t, "name", None) for t in topics)
    return [name for name in names if isinstance(name, str) and name]
