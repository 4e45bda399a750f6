"""Reading consumer-protocol subscriptions and assignments, at every version and when broken."""

from __future__ import annotations

import struct
from collections.abc import Mapping

import pytest
from kio.index import load_entity_schema
from kio.static.constants import EntityType

from kshim.protocol import codec
from kshim.protocol.consumer_protocol import assigned_partitions, subscribed_topics
from tests.groups.support import assignment


def versioned(schema: str, version: int, fields: Mapping[str, object]) -> bytes:
    """A payload as Java and librdkafka write it: int16 version, then that version's body."""
    entity_class = load_entity_schema(schema, version, EntityType.data)
    body = codec.encode_entity(entity_class, codec.build(entity_class, fields, any_version=True))
    return struct.pack(">h", version) + body


@pytest.mark.parametrize("version", range(4))
def test_subscriptions_of_every_version(version: int) -> None:
    fields = {
        "topics": ["a", "b"],
        "user_data": b"x",
        "owned_partitions": [{"topic": "a", "partitions": [0]}],
        "generation_id": 3,
        "rack_id": "r",
    }
    payload = versioned("consumer_protocol_subscription", version, fields)
    assert subscribed_topics(payload) == frozenset({"a", "b"})


@pytest.mark.parametrize("version", range(4))
def test_assignments_of_every_version(version: int) -> None:
    fields = {"assigned_partitions": [{"topic": "a", "partitions": [2, 0]}], "user_data": None}
    payload = versioned("consumer_protocol_assignment", version, fields)
    assert assigned_partitions(payload) == [("a", 2), ("a", 0)]


def test_a_newer_version_is_read_as_the_newest_known() -> None:
    fields = {"topics": ["a"], "owned_partitions": [], "generation_id": 1, "rack_id": None}
    payload = bytearray(versioned("consumer_protocol_subscription", 3, fields))
    payload[0:2] = struct.pack(">h", 9)  # v9 = v3's fields, then fields kshim does not know
    assert subscribed_topics(bytes(payload) + b"future fields") == frozenset({"a"})
    assert assigned_partitions(assignment("t", [1]) + b"\x00\x00") == [("t", 1)]


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x09"])
def test_malformed_payloads_are_unknown_not_errors(payload: bytes) -> None:
    assert subscribed_topics(payload) is None
    assert assigned_partitions(payload) is None
