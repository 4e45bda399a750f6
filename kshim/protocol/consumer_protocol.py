"""The consumer protocol's opaque payloads inside JoinGroup and SyncGroup.

With ``protocol_type == "consumer"`` each member's JoinGroup metadata is a
ConsumerProtocolSubscription and each SyncGroup assignment a
ConsumerProtocolAssignment: an int16 version followed by that version's body
(``ConsumerProtocolSubscription.json`` / ``ConsumerProtocolAssignment.json``
in Kafka's clients module). The broker treats them as opaque except to learn
which topics a group subscribes to (OffsetDelete) and who owns which
partition (consumption status). Later versions only append fields, so a
version newer than kio knows is read with the newest known one, and trailing
bytes are ignored, as Kafka's ConsumerProtocol does.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

from kio.index import load_entity_schema
from kio.serial import entity_reader
from kio.static.constants import EntityType

CONSUMER_PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")
_NEWEST_VERSION = 3


@cache
def _reader(schema_name: str, version: int) -> Any:
    return entity_reader(load_entity_schema(schema_name, version, EntityType.data))


def _decode(schema_name: str, payload: bytes) -> Any | None:
    if len(payload) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(payload, 0)
    if version < 0:
        return None
    try:
        entity, _ = _reader(schema_name, min(version, _NEWEST_VERSION))(
            memoryview(payload)[_VERSION.size :], 0
        )
    except Exception:  # a malformed payload is the client's business, not an error here
        return None
    return entity


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None when it does not parse."""
    subscription = _decode("consumer_protocol_subscription", metadata)
    return None if subscription is None else frozenset(subscription.topics)


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]] | None:
    """The (topic, partition) pairs of a ConsumerProtocolAssignment, or None."""
    decoded = _decode("consumer_protocol_assignment", assignment)
    if decoded is None:
        return None
    return [
        (str(topic.topic), int(partition))
        for topic in decoded.assigned_partitions
        for partition in topic.partitions
    ]
