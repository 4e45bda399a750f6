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

import functools
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from kio.serial import entity_reader

if TYPE_CHECKING:
    from kio.schema.consumer_protocol_assignment import v0 as assignment_v0
    from kio.schema.consumer_protocol_assignment import v1 as assignment_v1
    from kio.schema.consumer_protocol_assignment import v2 as assignment_v2
    from kio.schema.consumer_protocol_assignment import v3 as assignment_v3
    from kio.schema.consumer_protocol_subscription import v0 as subscription_v0
    from kio.schema.consumer_protocol_subscription import v1 as subscription_v1
    from kio.schema.consumer_protocol_subscription import v2 as subscription_v2
    from kio.schema.consumer_protocol_subscription import v3 as subscription_v3

    Subscription = (
        subscription_v0.ConsumerProtocolSubscription
        | subscription_v1.ConsumerProtocolSubscription
        | subscription_v2.ConsumerProtocolSubscription
        | subscription_v3.ConsumerProtocolSubscription
    )
    Assignment = (
        assignment_v0.ConsumerProtocolAssignment
        | assignment_v1.ConsumerProtocolAssignment
        | assignment_v2.ConsumerProtocolAssignment
        | assignment_v3.ConsumerProtocolAssignment
    )
    _Payload = TypeVar("_Payload", Subscription, Assignment)

CONSUMER_PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")


# The schema classes are loaded at the first payload read, not with this module: eight
# kio dataclass modules cost a broker about 0.9 MB and 12 ms of its start (measured
# 2026-11-29), and most brokers' groups are never asked who subscribes to what.
@functools.cache
def _subscriptions() -> Sequence[type[Subscription]]:
    """Each version's subscription class, by version number."""
    from kio.schema.consumer_protocol_subscription import v0, v1, v2, v3

    return (
        v0.ConsumerProtocolSubscription,
        v1.ConsumerProtocolSubscription,
        v2.ConsumerProtocolSubscription,
        v3.ConsumerProtocolSubscription,
    )


@functools.cache
def _assignments() -> Sequence[type[Assignment]]:
    """Each version's assignment class, by version number."""
    from kio.schema.consumer_protocol_assignment import v0, v1, v2, v3

    return (
        v0.ConsumerProtocolAssignment,
        v1.ConsumerProtocolAssignment,
        v2.ConsumerProtocolAssignment,
        v3.ConsumerProtocolAssignment,
    )


def _decode(versions: Sequence[type[_Payload]], payload: bytes) -> _Payload | None:
    if len(payload) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(payload, 0)
    if version < 0:
        return None
    reader = entity_reader(versions[min(version, len(versions) - 1)])
    try:
        entity, _ = reader(memoryview(payload)[_VERSION.size :], 0)
    except Exception:  # a malformed payload is the client's business, not an error here
        return None
    decoded: _Payload = entity
    return decoded


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None when it does not parse."""
    subscription = _decode(_subscriptions(), metadata)
    return None if subscription is None else frozenset(subscription.topics)


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]] | None:
    """The (topic, partition) pairs of a ConsumerProtocolAssignment, or None."""
    decoded = _decode(_assignments(), assignment)
    if decoded is None:
        return None
    return [
        (str(topic.topic), int(partition))
        for topic in decoded.assigned_partitions
        for partition in topic.partitions
    ]
