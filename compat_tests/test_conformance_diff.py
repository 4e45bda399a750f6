"""The differential conformance test's comparison, on answers built here (no broker): what
it must find (a default-valued or unknown tagged field, null against empty, a member id
that is not the leader) and what it must not (random ids, the brokers' own ports)."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from kio.serial import entity_writer

from compat_tests.conformance_allowed import Allowed, unexplained
from compat_tests.conformance_diff import Difference, Normaliser, differences
from compat_tests.wire_tree import Struct, WalkError, joined, walk_body
from kshim.protocol import codec

API_VERSIONS, JOIN_GROUP, FIND_COORDINATOR, FETCH, LIST_GROUPS = 18, 11, 10, 1, 16
INIT_PRODUCER_ID = 22
INT64_MINUS_ONE = (-1).to_bytes(8, "big", signed=True)


def body(api_key: int, version: int, fields: dict[str, Any]) -> bytes:
    cls = codec.response_class(api_key, version)
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, codec.build(cls, fields, any_version=True))
    return buffer.getvalue()


def tree(api_key: int, version: int, wire: bytes, port: int = 9092, names: str = "") -> Struct:
    walked = walk_body(codec.response_class(api_key, version), wire)
    return Normaliser(api_key, own_port=port, own_names=names).struct(walked)


def api_versions_v3() -> bytes:
    """ApiVersions v3 with no tagged field: its body ends with the tagged-field count 0."""
    keys = [{"api_key": 0, "min_version": 3, "max_version": 11}]
    wire = body(API_VERSIONS, 3, {"error_code": 0, "api_keys": keys, "throttle_time": 0})
    assert wire.endswith(b"\x00")
    return wire


def with_tags(wire: bytes, *tags: bytes) -> bytes:
    """``wire`` (ending with an empty tagged-field section) with ``tags`` in its place."""
    return wire[:-1] + bytes([len(tags)]) + b"".join(tags)


FEATURES_EPOCH = b"\x01\x08" + INT64_MINUS_ONE  # tag 1, 8 bytes: -1, its default
ZK_MIGRATION_READY = b"\x03\x01\x00"  # tag 3, 1 byte: false, its default


def test_a_tagged_field_sent_with_its_default_value_by_one_broker_is_a_difference() -> None:
    plain = api_versions_v3()
    explicit = with_tags(plain, FEATURES_EPOCH)

    found = differences(tree(API_VERSIONS, 3, plain), tree(API_VERSIONS, 3, explicit))

    assert found == [Difference("finalized_features_epoch", "absent", "sent (-1)")]


def test_an_unknown_tag_is_a_difference() -> None:
    plain = api_versions_v3()
    extra = with_tags(plain, b"\x09\x02\xab\xcd")

    found = differences(tree(API_VERSIONS, 3, extra), tree(API_VERSIONS, 3, plain))

    assert found == [Difference("(unknown tag 9)", "sent (b'\\xab\\xcd')", "absent")]


def test_tagged_fields_in_another_order_are_a_difference() -> None:
    plain = api_versions_v3()
    ascending = with_tags(plain, FEATURES_EPOCH, ZK_MIGRATION_READY)
    descending = with_tags(plain, ZK_MIGRATION_READY, FEATURES_EPOCH)

    found = differences(tree(API_VERSIONS, 3, ascending), tree(API_VERSIONS, 3, descending))

    assert found == [Difference("(tagged field order)", "[1, 3]", "[3, 1]")]


def test_a_tree_is_its_bytes_and_left_over_bytes_are_refused() -> None:
    wire = with_tags(api_versions_v3(), FEATURES_EPOCH, b"\x09\x02\xab\xcd")

    assert joined(walk_body(codec.response_class(API_VERSIONS, 3), wire)) == wire
    with pytest.raises(WalkError, match="left over"):
        walk_body(codec.response_class(API_VERSIONS, 3), wire + b"\x00")


def joined_group(leader: str, member: str) -> bytes:
    return body(
        JOIN_GROUP,
        5,
        {
            "error_code": 0,
            "generation_id": 1,
            "protocol_name": "range",
            "leader": leader,
            "member_id": member,
            "members": [{"member_id": member, "metadata": b"m"}],
        },
    )


def test_random_member_ids_compare_equal_but_not_a_leader_that_is_another_member() -> None:
    first, second, third = (f"kshim-compat-{uuid.uuid4()}" for _ in range(3))

    same_shape = differences(
        tree(JOIN_GROUP, 5, joined_group(first, first)),
        tree(JOIN_GROUP, 5, joined_group(second, second)),
    )
    other_leader = differences(
        tree(JOIN_GROUP, 5, joined_group(first, first)),
        tree(JOIN_GROUP, 5, joined_group(third, second)),
    )

    assert same_shape == []
    # Numbered in order of appearance: the leader comes first, so the member id shows.
    assert other_leader[0].path == "member_id"
    assert joined(tree(JOIN_GROUP, 5, joined_group(first, first))) == joined(
        tree(JOIN_GROUP, 5, joined_group(second, second))
    )


def coordinator(port: int) -> bytes:
    where = {"node_id": 1, "host": "127.0.0.1", "port": port, "error_code": 0}
    return body(FIND_COORDINATOR, 0, where)


def test_each_broker_must_name_its_own_port() -> None:
    ours, theirs = coordinator(9092), coordinator(19092)

    assert (
        differences(tree(FIND_COORDINATOR, 0, ours, 9092), tree(FIND_COORDINATOR, 0, theirs, 19092))
        == []
    )
    assert differences(
        tree(FIND_COORDINATOR, 0, ours, 9092), tree(FIND_COORDINATOR, 0, ours, 19092)
    ) == [Difference("port", "<own port>", "9092")]


def fetched(aborted: list[Any] | None, version: int = 4) -> bytes:
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 3,
        "aborted_transactions": aborted,
        "records": b"",
    }
    return body(FETCH, version, {"responses": [{"topic": "t", "partitions": [partition]}]})


@pytest.mark.parametrize("version", [4, 12], ids=["legacy", "compact"])
def test_a_null_array_is_not_an_empty_one(version: int) -> None:
    found = differences(
        tree(FETCH, version, fetched(None, version)), tree(FETCH, version, fetched([], version))
    )

    assert found == [
        Difference("responses['t'].partitions[0].aborted_transactions", "null", "0 items")
    ]


def listed(*groups: str) -> bytes:
    entries = [{"group_id": group, "protocol_type": "consumer"} for group in groups]
    return body(LIST_GROUPS, 3, {"error_code": 0, "groups": entries})


def test_keyed_items_are_matched_by_key_and_only_the_cases_own_groups_are_listed() -> None:
    ours = "conformance-c1-"
    kshim = tree(LIST_GROUPS, 3, listed("other", f"{ours}a", f"{ours}b"), names=ours)
    kafka = tree(LIST_GROUPS, 3, listed(f"{ours}b", f"{ours}c"), names=ours)

    found = differences(kshim, kafka)

    assert found == [
        Difference(
            f"groups['{ours}a']", f"{{group_id='{ours}a', protocol_type='consumer'}}", "absent"
        ),
        Difference(
            f"groups['{ours}c']", "absent", f"{{group_id='{ours}c', protocol_type='consumer'}}"
        ),
    ]


def test_the_allow_list_leaves_other_differences_and_names_entries_that_matched_nothing() -> None:
    port = Difference("port", "1", "2")
    host = Difference("host", "'a'", "'b'")
    allowed = (
        Allowed(FIND_COORDINATOR, "po*", "1", "2", "why"),
        Allowed(FIND_COORDINATOR, "node_id", None, None, "gone"),
        Allowed(FIND_COORDINATOR, "rack", None, None, "someone else's", being_fixed=True),
        Allowed(FIND_COORDINATOR, "host", None, None, "another version", versions=(4, 6)),
    )

    left, stale = unexplained(FIND_COORDINATOR, 0, [port, host], allowed=allowed)

    assert left == [host]
    assert stale == [allowed[1]]


def initialised(producer_id: int) -> bytes:
    return body(INIT_PRODUCER_ID, 4, {"error_code": 0, "producer_id": producer_id})


def test_producer_zero_is_an_id_like_any_other_but_minus_one_is_none() -> None:
    first, later, none = initialised(0), initialised(5000), initialised(-1)

    assert differences(tree(INIT_PRODUCER_ID, 4, first), tree(INIT_PRODUCER_ID, 4, later)) == []
    assert differences(tree(INIT_PRODUCER_ID, 4, later), tree(INIT_PRODUCER_ID, 4, none)) == [
        Difference("producer_id", "<producer#1>", "-1")
    ]


def fetch_answer(session_id: int) -> bytes:
    return body(FETCH, 12, {"error_code": 0, "session_id": session_id, "responses": []})


def test_random_session_ids_compare_equal_but_no_session_is_not_a_session() -> None:
    """A fetch session's id is drawn at random by each broker (KIP-227); 0 says that no
    session was opened, so it stays 0 and shows against an id."""
    first, second = tree(FETCH, 12, fetch_answer(1_234_567)), tree(FETCH, 12, fetch_answer(98))

    opened_twice = differences(first, second)
    opened_once = differences(tree(FETCH, 12, fetch_answer(0)), second)

    assert opened_twice == []
    assert joined(first) == joined(second)
    assert b"<session#1>" in joined(first)
    assert opened_once == [Difference("session_id", "0", "<session#1>")]
