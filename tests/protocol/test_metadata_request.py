"""The hand-written Metadata request decoder against kio's path (bounds walk, kio's
reader), on requests kio encodes and on truncated and garbled ones.

kio's path is what decoded every Metadata request before; the hand-written decoder exists
only for speed, so it must read the same names and flags from every valid body and refuse
every body kio's path refuses.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.client.frames import encode_body
from kshim.protocol import codec
from kshim.protocol.metadata_request import (
    FIRST_WITH_TOPIC_ID,
    MAX_VERSION,
    MIN_VERSION,
    MetadataRequest,
    decode_metadata_request,
)
from kshim.protocol.primitives import DecodeError

METADATA_KEY = 3
VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
names = st.text(max_size=12)


def via_kio(version: int, body: bytes) -> MetadataRequest:
    """What kio's path reads from ``body``; raises DecodeError where it refuses it."""
    entity = codec.decode_request(METADATA_KEY, version, body, 0)
    topics = None if entity.topics is None else tuple(topic.name for topic in entity.topics)
    ids = [getattr(topic, "topic_id", None) for topic in entity.topics or ()]
    id_bytes = tuple(bytes(16) if topic_id is None else topic_id.bytes for topic_id in ids)
    return MetadataRequest(
        topics,
        getattr(entity, "allow_auto_topic_creation", True),
        getattr(entity, "include_cluster_authorized_operations", False),
        getattr(entity, "include_topic_authorized_operations", False),
        id_bytes if any(topic_id != bytes(16) for topic_id in id_bytes) else (),
    )


def outcome(decode: Any, version: int, body: bytes) -> MetadataRequest | str:
    try:
        result: MetadataRequest = decode(version, body)
    except DecodeError:
        return "refused"
    return result


def hand_written(version: int, body: bytes) -> MetadataRequest:
    return decode_metadata_request(version, body, 0)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.sampled_from(VERSIONS))
    with_id = version >= FIRST_WITH_TOPIC_ID
    topic = st.fixed_dictionaries(
        {
            "name": (st.none() | names) if with_id else names,
            "topic_id": st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)),
        }
    )
    topics = st.lists(topic, max_size=5)
    fields = {
        "topics": draw(topics if version == 0 else st.none() | topics),
        "allow_auto_topic_creation": draw(st.booleans()),
        "include_cluster_authorized_operations": draw(st.booleans()),
        "include_topic_authorized_operations": draw(st.booleans()),
    }
    return version, encode_body(METADATA_KEY, version, fields)


@settings(max_examples=400, deadline=None)
@given(requests())
def test_reads_what_kio_reads(request: tuple[int, bytes]) -> None:
    version, body = request
    assert hand_written(version, body) == via_kio(version, body)


@settings(max_examples=600, deadline=None)
@given(requests(), st.data())
def test_refuses_what_kio_refuses(request: tuple[int, bytes], data: st.DataObject) -> None:
    """Truncated, overwritten and extended bodies: both decoders refuse, or both read
    the same (trailing bytes are ignored by both)."""
    version, body = request
    garbled = bytearray(body)
    cut = data.draw(st.integers(0, len(garbled)))
    edits = data.draw(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), max_size=3))
    for position, value in edits:
        if garbled:
            garbled[position % len(garbled)] = value
    mutated = data.draw(st.sampled_from([bytes(garbled[:cut]), bytes(garbled)]))
    mutated += data.draw(st.binary(max_size=4))
    assert outcome(hand_written, version, mutated) == outcome(via_kio, version, mutated)


REFUSED = {
    "v0 null topics": (0, struct.pack(">i", -1)),
    "v1 negative count": (1, struct.pack(">i", -5)),
    "v1 count past the end": (1, struct.pack(">i", 2**31 - 1)),
    "v1 null name": (1, struct.pack(">ih", 1, -1)),
    "v1 name past the end": (1, struct.pack(">ih", 1, 5) + b"ab"),
    "v1 name not UTF-8": (1, struct.pack(">ih", 1, 1) + b"\xff"),
    "v4 boolean 2": (4, struct.pack(">i", -1) + b"\x02"),
    "v4 boolean missing": (4, struct.pack(">i", -1)),
    "v9 null name": (9, bytes.fromhex("02 00 00 00 00 00")),
    "v12 count varint 2**32-1": (12, bytes.fromhex("ffffffff0f")),
    "v12 varint longer than 5 bytes": (12, bytes.fromhex("818080808001")),
    "v12 topic id past the end": (12, bytes.fromhex("02") + bytes(10)),
    "v12 tagged field past the end": (12, bytes.fromhex("02") + bytes(16) + b"\x02t\x01\x00\x05"),
    "v12 no tagged fields at the end": (12, bytes.fromhex("00 01 00")),
}


@pytest.mark.parametrize("body", REFUSED.values(), ids=REFUSED.keys())
def test_refusals(body: tuple[int, bytes]) -> None:
    version, data = body
    with pytest.raises(DecodeError):
        hand_written(version, data)
    with pytest.raises(DecodeError):
        via_kio(version, data)


def test_librdkafkas_stray_trailing_bytes_are_ignored() -> None:
    """librdkafka's all-topics request carries three stray bytes (librdkafka#5049)."""
    body = encode_body(METADATA_KEY, 12, {"topics": None}) + b"\x00\x01\x02"
    assert hand_written(12, body) == MetadataRequest(None)


def test_reads_from_the_body_offset_of_a_frame() -> None:
    body = encode_body(METADATA_KEY, 1, {"topics": [{"name": "orders"}, {"name": "é"}]})
    assert decode_metadata_request(1, b"header" + body, 6).topics == ("orders", "é")


def test_versions_lacking_a_flag_get_kafkas_default() -> None:
    """Before v4 every request allowed auto-creation (KIP-204 made it a choice)."""
    body = encode_body(METADATA_KEY, 3, {"topics": [{"name": "orders"}]})
    assert hand_written(3, body) == MetadataRequest(("orders",), True, False, False)


@pytest.mark.parametrize("version", [MIN_VERSION - 1, MAX_VERSION + 1])
def test_versions_it_does_not_decode_are_refused(version: int) -> None:
    with pytest.raises(DecodeError, match="not decoded here"):
        decode_metadata_request(version, b"\x00" * 8, 0)
