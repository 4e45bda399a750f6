"""Bounds checks on request bodies before kio decodes them (kshim/protocol/bounds.py).

Every served (api_key, version) that kio knows: kio's own encodings pass, and
truncated or corrupted ones either decode or raise DecodeError, in-process, so
a count that would make kio's native reader abort kills this test run. The
inputs that aborted the broker or reached handlers as None are spelled out by
hand, byte by byte.
"""

from __future__ import annotations

import dataclasses
import struct
import typing
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from kshim.protocol import bounds, codec
from kshim.protocol.apis import ADVERTISED, serves
from kshim.protocol.primitives import DecodeError

Pair = tuple[int, int]
PRODUCE, FETCH, LIST_OFFSETS, METADATA, CREATE_TOPICS = 0, 1, 2, 3, 19

# kio's Records is a phantom type over bytes that hypothesis cannot resolve by itself.
st.register_type_strategy(Records, st.binary(max_size=64))


def kio_knows(api_key: int, version: int) -> bool:
    try:
        codec.request_class(api_key, version)
    except KeyError:
        return False
    return True


PAIRS: list[Pair] = [
    (api_key, version)
    for api_key, (low, high) in ADVERTISED.items()
    for version in range(low, high + 1)
    if serves(api_key, version) and kio_knows(api_key, version)
]
PAIR_IDS = [f"api{api_key}v{version}" for api_key, version in PAIRS]
MAX_SWEPT_POSITIONS = 200
EXAMPLES = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def encode(api_key: int, version: int, fields: dict[str, Any]) -> bytes:
    cls = codec.request_class(api_key, version)
    return codec.encode_entity(cls, codec.build(cls, fields, any_version=True))


def check(api_key: int, version: int, body: bytes) -> int:
    return bounds.check_body(codec.request_class(api_key, version), body)


def assert_refused(api_key: int, version: int, body: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        check(api_key, version, body)
    with pytest.raises(DecodeError, match=message):
        codec.decode_request(api_key, version, body, 0)


def encoded_requests(pair: Pair) -> st.SearchStrategy[bytes]:
    cls = codec.request_class(*pair)
    return st.from_type(cls).map(lambda entity: codec.encode_entity(cls, entity))


def decodes_or_refuses(api_key: int, version: int, body: bytes) -> None:
    """kio must not abort: the body decodes or raises DecodeError, nothing else.

    What decodes holds None only where its type admits it, so handlers can iterate.
    """
    try:
        entity = codec.decode_request(api_key, version, body, 0)
    except DecodeError:
        return
    assert_none_only_where_allowed(entity)


FieldKind = tuple[str, bool, str]
FIELD_KINDS: dict[type[Any], tuple[FieldKind, ...]] = {}


def field_kinds(cls: type[Any]) -> tuple[FieldKind, ...]:
    """(name, admits None, "struct", "structs" or "") for each field of ``cls``, cached."""
    if cls not in FIELD_KINDS:
        hints = typing.get_type_hints(cls)
        FIELD_KINDS[cls] = tuple(
            field_kind(field.name, hints[field.name]) for field in dataclasses.fields(cls)
        )
    return FIELD_KINDS[cls]


def field_kind(name: str, hint: Any) -> FieldKind:
    nullable = type(None) in typing.get_args(hint) and typing.get_origin(hint) is not tuple
    if nullable:
        (hint,) = (argument for argument in typing.get_args(hint) if argument is not type(None))
    kind = "struct"
    if typing.get_origin(hint) is tuple:
        hint, kind = typing.get_args(hint)[0], "structs"
    return (name, nullable, kind if dataclasses.is_dataclass(hint) else "")


def assert_none_only_where_allowed(entity: Any) -> None:
    for name, nullable, kind in field_kinds(type(entity)):
        value = getattr(entity, name)
        if value is None:
            assert nullable, (type(entity), name)
        elif kind == "struct":
            assert_none_only_where_allowed(value)
        elif kind == "structs":
            for item in value:
                assert_none_only_where_allowed(item)


# --- valid requests ---------------------------------------------------------------------


def test_pairs_cover_the_served_apis() -> None:
    assert {api_key for api_key, _ in PAIRS} == set(ADVERTISED)
    assert (PRODUCE, 2) not in PAIRS  # advertised for feature detection, not served


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_kio_encodings_pass(pair: Pair) -> None:
    @EXAMPLES
    @given(encoded_requests(pair))
    def run(body: bytes) -> None:
        assert check(*pair, body) == len(body)
        # Not a plain decode: kio writes timedeltas its own reader refuses as overflowing
        # (OffsetCommit v2-4 retention_time_ms), a DecodeError that is none of ours.
        decodes_or_refuses(*pair, body)

    run()


def produce_fields(records: bytes | None = b"batch") -> dict[str, Any]:
    partition = {"index": 3, "records": records}
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout": 1500,
        "topic_data": [{"name": "orders", "partition_data": [partition]}],
    }


def fetch_fields() -> dict[str, Any]:
    partition = {"partition": 0, "fetch_offset": 7, "partition_max_bytes": 1 << 20}
    return {
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [{"topic": "orders", "partitions": [partition]}],
        "forgotten_topics_data": [{"topic": "old", "partitions": [1, 2]}],
        "rack_id": "",
    }


HAND_BUILT: dict[str, tuple[int, int, dict[str, Any]]] = {
    "produce v3": (PRODUCE, 3, produce_fields()),
    "produce v9": (PRODUCE, 9, produce_fields()),
    "produce v9 null records": (PRODUCE, 9, produce_fields(None)),
    "produce v11 transactional": (PRODUCE, 11, {**produce_fields(), "transactional_id": "tx"}),
    "fetch v4": (FETCH, 4, fetch_fields()),
    "fetch v12": (FETCH, 12, fetch_fields()),
    "fetch v12 cluster id tag": (FETCH, 12, {**fetch_fields(), "cluster_id": "kshim"}),
    "metadata v1 all topics": (METADATA, 1, {"topics": None}),
    "metadata v12 all topics": (METADATA, 12, {"topics": None}),
    "metadata v12": (METADATA, 12, {"topics": [{"name": "orders"}, {"name": None}]}),
    "list offsets v1": (
        LIST_OFFSETS,
        1,
        {"topics": [{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
    ),
    "list offsets v7": (
        LIST_OFFSETS,
        7,
        {"topics": [{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -2}]}]},
    ),
    "create topics v2": (
        CREATE_TOPICS,
        2,
        {
            "topics": [
                {
                    "name": "orders",
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "retention.ms", "value": None}],
                }
            ],
            "timeout": 1000,
        },
    ),
    "create topics v7": (
        CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": "orders",
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                }
            ],
            "timeout": 1000,
        },
    ),
}


@pytest.mark.parametrize(("api_key", "version", "fields"), HAND_BUILT.values(), ids=HAND_BUILT)
def test_hand_built_requests_pass(api_key: int, version: int, fields: dict[str, Any]) -> None:
    body = encode(api_key, version, fields)
    assert check(api_key, version, body) == len(body)
    # Trailing bytes stay tolerated (librdkafka's Metadata carries some: librdkafka#5049).
    assert check(api_key, version, body + b"\x00\x01\x02") == len(body)
    assert codec.decode_request(api_key, version, b"\xff" * 4 + body + b"\x07", 4) is not None


# --- the inputs that aborted the broker or reached handlers as None --------------------


HUGE_COUNTS: dict[str, tuple[int, int, bytes]] = {
    "metadata v12 topics varint 2**32-1": (METADATA, 12, bytes.fromhex("ffffffff0f")),
    # null transactional id, acks, timeout, then the topic_data count
    "produce v9 topic_data varint 2**35-1": (
        PRODUCE,
        9,
        bytes.fromhex("00 ffff 00001388 ffffffff7f"),
    ),
    # replica id, isolation level, then the topics count
    "list offsets v7 topics varint 2**32": (
        LIST_OFFSETS,
        7,
        bytes.fromhex("ffffffff 00 8080808010"),
    ),
    "metadata v1 topics int32 2**31-1": (METADATA, 1, struct.pack(">i", 2**31 - 1)),
}


@pytest.mark.parametrize(("api_key", "version", "body"), HUGE_COUNTS.values(), ids=HUGE_COUNTS)
def test_count_beyond_the_body_is_refused(api_key: int, version: int, body: bytes) -> None:
    assert_refused(api_key, version, body, "items cannot fit")


NULL_PRODUCE_V9_HEAD = bytes.fromhex("00 ffff 00001388")  # null transactional id, acks, timeout
NULL_PRODUCE_V8_HEAD = bytes.fromhex("ffff ffff 00001388")
NULLS: dict[str, tuple[int, int, bytes]] = {
    "produce v9 topic_data": (PRODUCE, 9, NULL_PRODUCE_V9_HEAD + bytes.fromhex("00 00")),
    "produce v8 topic_data": (PRODUCE, 8, NULL_PRODUCE_V8_HEAD + bytes.fromhex("ffffffff")),
    # one topic named "t" whose partition_data is null
    "produce v9 partition_data": (
        PRODUCE,
        9,
        NULL_PRODUCE_V9_HEAD + bytes.fromhex("02 02 74 00 00 00"),
    ),
    "produce v8 partition_data": (
        PRODUCE,
        8,
        NULL_PRODUCE_V8_HEAD + bytes.fromhex("00000001 0001 74 ffffffff"),
    ),
    # replica id, max wait, min bytes, max bytes, isolation level, session id and epoch
    "fetch v12 topics": (
        FETCH,
        12,
        bytes.fromhex("ffffffff 000001f4 00000001 00100000 00 00000000 ffffffff 00 01 01 00"),
    ),
    "produce v9 topic name": (PRODUCE, 9, NULL_PRODUCE_V9_HEAD + bytes.fromhex("02 00 01 00 00")),
    "produce v8 topic name": (
        PRODUCE,
        8,
        NULL_PRODUCE_V8_HEAD + bytes.fromhex("00000001 ffff 00000000"),
    ),
}


@pytest.mark.parametrize(("api_key", "version", "body"), NULLS.values(), ids=NULLS)
def test_null_in_a_non_nullable_field_is_refused(api_key: int, version: int, body: bytes) -> None:
    assert_refused(api_key, version, body, "null in a non-nullable field")


def test_nullable_fields_accept_null() -> None:
    assert check(METADATA, 1, bytes.fromhex("ffffffff")) == 4
    assert check(METADATA, 12, bytes.fromhex("00 01 00 00")) == 4
    body = encode(PRODUCE, 9, produce_fields(None))
    assert codec.decode_request(PRODUCE, 9, body, 0).topic_data[0].partition_data[0].records is None


# --- other broken bodies ----------------------------------------------------------------


def test_string_longer_than_the_body_is_refused() -> None:
    # Produce v8: one topic whose name claims 300 bytes and has four.
    body = NULL_PRODUCE_V8_HEAD + bytes.fromhex("00000001 012c 74747474")
    assert_refused(PRODUCE, 8, body, r"needs 300 bytes, only 4 left")


def test_records_longer_than_the_body_are_refused() -> None:
    body = encode(PRODUCE, 9, produce_fields(b"x" * 10))
    records_length_at = len(body) - 3 - 10 - 1  # three empty tag sections end the body
    assert body[records_length_at] == 11
    broken = body[:records_length_at] + b"\x7f" + body[records_length_at + 1 :]
    assert_refused(PRODUCE, 9, broken, r"PartitionProduceData\.records: needs 126 bytes")


def test_negative_length_is_refused() -> None:
    body = NULL_PRODUCE_V8_HEAD + bytes.fromhex("00000001 fffe 00000000")
    assert_refused(PRODUCE, 8, body, "negative length -2")
    assert_refused(METADATA, 1, struct.pack(">i", -5), "negative length -5")


def test_varint_longer_than_five_bytes_is_refused() -> None:
    assert_refused(METADATA, 12, bytes.fromhex("818080808001"), "varint longer than 5 bytes")
    assert_refused(METADATA, 12, bytes.fromhex("8180"), "varint runs past the end")


def test_fixed_fields_past_the_end_are_refused() -> None:
    assert_refused(PRODUCE, 9, bytes.fromhex("00 ffff 0000"), r"acks, .*timeout: needs 6 bytes")


def fetch_v12_with_tags(tags: bytes) -> bytes:
    body = encode(FETCH, 12, fetch_fields())
    assert body[-1] == 0  # the top-level tagged-field section, empty
    return body[:-1] + tags


def test_tagged_fields_are_checked() -> None:
    # cluster_id is tag 0: a compact string of 2 bytes inside a 3-byte field.
    assert check(FETCH, 12, fetch_v12_with_tags(bytes.fromhex("01 00 03 03 6b 73"))) > 0
    # An unknown tag is skipped by its size, whatever it holds.
    assert check(FETCH, 12, fetch_v12_with_tags(bytes.fromhex("01 09 02 ffff"))) > 0
    # The string claims more than its field's size, though the body has the bytes.
    overrun = fetch_v12_with_tags(bytes.fromhex("01 00 01 05 6b 73 73 73"))
    assert_refused(FETCH, 12, overrun, r"FetchRequest\.cluster_id: needs 4 bytes, only 0 left")
    assert_refused(FETCH, 12, fetch_v12_with_tags(bytes.fromhex("01 07 05 00")), "tag 7")
    assert_refused(FETCH, 12, fetch_v12_with_tags(bytes.fromhex("ffffff0f")), "tagged fields")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Empty:
    __flexible__: ClassVar[bool] = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    __flexible__: ClassVar[bool] = True
    value: int = dataclasses.field(metadata={"kafka_type": "int32"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Shapes:
    """Shapes no served request has: an array of empty structs and a nullable struct."""

    __flexible__: ClassVar[bool] = True
    empties: tuple[Empty, ...] = dataclasses.field(metadata={})
    inner: Inner | None = dataclasses.field(metadata={})


def test_an_array_of_empty_structs_cannot_claim_more_items_than_bytes() -> None:
    # As in Kafka's generated readers, each item counts as one byte at least.
    assert bounds.check_body(Shapes, bytes.fromhex("03 ff 00 aa")) == 3
    with pytest.raises(DecodeError, match="3 items cannot fit in the 2 bytes left"):
        bounds.check_body(Shapes, bytes.fromhex("04 ff 00"))


def test_a_nullable_struct_has_a_marker() -> None:
    assert bounds.check_body(Shapes, bytes.fromhex("01 ff 00")) == 3
    assert bounds.check_body(Shapes, bytes.fromhex("01 01 00000007 00 00")) == 8
    with pytest.raises(DecodeError, match=r"Inner\.value: needs 4 bytes, only 2 left"):
        bounds.check_body(Shapes, bytes.fromhex("01 01 0000"))


# --- kio never aborts on a broken body --------------------------------------------------


# Counts and lengths at their extremes, in both encodings: the values that made kio's
# reader reserve gigabytes, and nulls.
NASTY_PATCHES = tuple(
    bytes.fromhex(text)
    for text in ("ffffffff0f", "ffffffff7f", "8080808010", "7fffffff", "ffffffff", "ffff", "00")
)


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_truncated_or_corrupted_bodies_decode_or_raise(pair: Pair) -> None:
    @EXAMPLES
    @given(encoded_requests(pair), st.data())
    def run(body: bytes, data: st.DataObject) -> None:
        cut = data.draw(st.integers(0, len(body)), label="cut")
        decodes_or_refuses(*pair, body[:cut])
        at = data.draw(st.integers(0, max(len(body) - 1, 0)), label="at")
        patch = data.draw(st.binary(min_size=1, max_size=5), label="patch")
        decodes_or_refuses(*pair, body[:at] + patch + body[at + len(patch) :])

    run()


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_extreme_values_anywhere_decode_or_raise(pair: Pair) -> None:
    # Every position of a few bodies, so every count and length gets each extreme.
    @settings(EXAMPLES, max_examples=3)
    @given(encoded_requests(pair))
    def run(body: bytes) -> None:
        for at in range(min(len(body), MAX_SWEPT_POSITIONS)):
            for patch in NASTY_PATCHES:
                decodes_or_refuses(*pair, body[:at] + patch + body[at + len(patch) :])

    run()
