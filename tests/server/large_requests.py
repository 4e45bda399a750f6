"""Large, harmless requests for every served API, and what the broker must answer to each.

A request here is grown by its arrays (topics, partitions, groups, ids) until its frame
body has an exact size, so one test can hold it on each side of the broker's receive
thresholds: the 16 KiB staging buffer and the 1 MiB part size (kshim/protocol/framing.py).
Every element names something that does not exist or that Kafka refuses (topic names
with '!', outside [a-zA-Z0-9._-]), and every request that could change state says
validate_only where it can, so however many elements there are nothing is created,
deleted or committed.

Each ``ApiCase`` says how to build its request (kio field names, any version), and
what the answer says per element: the broker must answer each element it was asked
about, in order, with the expected error code. For the few APIs that answer the
request as a whole (JoinGroup, SyncGroup, ListGroups, ListTransactions, OffsetDelete),
the answer is summarised as a short list instead.
"""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, served_range
from kshim.protocol.errors import ErrorCode
from tests.bad_input_support import make_batch
from tests.raw_client import encode_body, request_header, with_size

KIB, MIB = 1 << 10, 1 << 20
# Kafka's longest legal topic name (Topic.MAX_NAME_LENGTH); ids use the same length so
# that an 8 MiB request holds tens of thousands of elements, not millions.
NAME_LENGTH = 249
PARTITIONS_PER_TOPIC = 2
# A client id holds up to 32767 bytes (an int16 length): it pads a frame to its exact size.
MAX_CLIENT_ID = 32767
# Bytes left for the client id over the estimate, so that array counts growing to
# longer varints (compact encodings, KIP-482) never push a frame past its size.
SIZE_SLACK = 16
GROUP = "large-requests-group"
UNKNOWN_PRODUCER_ID = 1 << 40
TOPIC_RESOURCE = 2
SET = 0  # IncrementalAlterConfigs operation
LATEST = -1  # ListOffsets timestamp
BATCH = make_batch([b"large-requests"])  # one small valid record batch

Answer = tuple[Hashable, Hashable]  # (which element, or which part of the answer; what it says)
Fields = dict[str, Any]


# --- element names ---------------------------------------------------------------------


@cache
def unknown_topic(index: int) -> str:
    """A topic name no broker creates: '!' is not a legal topic name character."""
    return f"large!{index:08d}!".ljust(NAME_LENGTH, "x")


@cache
def unknown_id(kind: str, index: int) -> str:
    """A group, member, transactional or protocol id that nothing uses."""
    return f"large-{kind}-{index:08d}-".ljust(NAME_LENGTH, "x")


def topics(count: int, partition: Callable[[int], Fields], partitions_field: str) -> list[Fields]:
    """``count`` unknown topics of PARTITIONS_PER_TOPIC partitions each, as request fields."""
    return [
        {"name": unknown_topic(i), partitions_field: [partition(p) for p in partition_range()]}
        for i in range(count)
    ]


def partition_range() -> range:
    return range(PARTITIONS_PER_TOPIC)


# --- what an answer says per element -----------------------------------------------------


def per_partition(
    topic_answers: Sequence[Any],
    partitions_field: str,
    *,
    name_field: str = "name",
    index_field: str = "partition_index",
    error_field: str = "error_code",
) -> list[Answer]:
    """((topic, partition), error code) of each partition of an answer, in order."""
    return [
        (
            (getattr(topic, name_field), getattr(partition, index_field)),
            int(getattr(partition, error_field)),
        )
        for topic in topic_answers
        for partition in getattr(topic, partitions_field)
    ]


def every_partition(error: int) -> Callable[[int, int], list[Answer]]:
    """The expected answer: ``error`` for each partition of each requested topic."""
    return lambda _version, count: [
        ((unknown_topic(i), p), error) for i in range(count) for p in partition_range()
    ]


def per_element(
    items: Sequence[Any], key_field: str, error_field: str = "error_code"
) -> list[Answer]:
    return [(getattr(item, key_field), int(getattr(item, error_field))) for item in items]


def every_element(name: Callable[[int], str], error: int) -> Callable[[int, int], list[Answer]]:
    return lambda _version, count: [(name(i), error) for i in range(count)]


def constant(answer: list[Answer]) -> Callable[[int, int], list[Answer]]:
    """The expected answer of an API that answers the request as a whole."""
    return lambda _version, _count: answer


def group_id(index: int) -> str:
    return unknown_id("group", index)


def transactional_id(index: int) -> str:
    return unknown_id("transaction", index)


# --- the cases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiCase:
    # (version, element count) -> request fields, by kio field name
    build: Callable[[int, int], Fields]
    # (version, decoded response) -> what it says, per element or as a whole
    answers: Callable[[int, Any], list[Answer]]
    # (version, element count) -> what it must say
    expected: Callable[[int, int], list[Answer]]


def _produce(_version: int, count: int) -> Fields:
    # Even partitions carry a valid batch, odd ones none (null records).
    def partition(p: int) -> Fields:
        return {"index": p, "records": None if p % 2 else BATCH}

    return {"acks": -1, "timeout": 5000, "topic_data": topics(count, partition, "partition_data")}


def _fetch(_version: int, count: int) -> Fields:
    def partition(p: int) -> Fields:
        return {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1024}

    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": MIB,
        "session_epoch": -1,
        "topics": [
            {"topic": t["name"], "partitions": t["partitions"]}
            for t in topics(count, partition, "partitions")
        ],
    }


def _list_offsets(_version: int, count: int) -> Fields:
    def partition(p: int) -> Fields:
        return {"partition_index": p, "timestamp": LATEST}

    return {"replica_id": -1, "topics": topics(count, partition, "partitions")}


def _metadata(_version: int, count: int) -> Fields:
    # v4+ can refuse auto-creation; v0 cannot, and the illegal names keep it from happening.
    return {
        "topics": [{"name": unknown_topic(i)} for i in range(count)],
        "allow_auto_topic_creation": False,
    }


def _metadata_expected(version: int, count: int) -> list[Answer]:
    # Without allow_auto_topic_creation (v0-3) the broker tries to create the topic and
    # the name is refused; otherwise the topic is simply unknown.
    error = (
        ErrorCode.invalid_topic_exception if version < 4 else ErrorCode.unknown_topic_or_partition
    )
    return every_element(unknown_topic, error)(version, count)


def _offset_commit(_version: int, count: int) -> Fields:
    def partition(p: int) -> Fields:
        return {"partition_index": p, "committed_offset": 0, "committed_metadata": None}

    # Generation -1 and no member: a standalone commit, allowed for an unknown group.
    return {
        "group_id": GROUP,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": topics(count, partition, "partitions"),
    }


def _offset_fetch_topics(count: int) -> list[Fields]:
    return [
        {"name": unknown_topic(i), "partition_indexes": list(partition_range())}
        for i in range(count)
    ]


def _offset_fetch(version: int, count: int) -> Fields:
    if version >= 8:  # KIP-709: a batch of groups
        return {"groups": [{"group_id": GROUP, "topics": _offset_fetch_topics(count)}]}
    return {"group_id": GROUP, "topics": _offset_fetch_topics(count)}


def _offset_fetch_answers(version: int, response: Any) -> list[Answer]:
    groups = response.groups if version >= 8 else [response]
    return [
        (
            (topic.name, partition.partition_index),
            (int(partition.error_code), partition.committed_offset),
        )
        for group in groups
        for topic in group.topics
        for partition in topic.partitions
    ]


def _offset_fetch_expected(_version: int, count: int) -> list[Answer]:
    # No error, and -1: nothing was ever committed.
    return [((unknown_topic(i), p), (NONE, -1)) for i in range(count) for p in partition_range()]


def _join_group(_version: int, count: int) -> Fields:
    # A session timeout below group.min.session.timeout.ms: refused before any group exists.
    return {
        "group_id": GROUP,
        "session_timeout": 1,
        "rebalance_timeout": 1,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [
            {"name": unknown_id("protocol", i), "metadata": b"\x00\x01"} for i in range(count)
        ],
    }


def _sync_group(_version: int, count: int) -> Fields:
    return {
        "group_id": GROUP,
        "generation_id": 1,
        "member_id": unknown_id("member", 0),
        "assignments": [
            {"member_id": unknown_id("member", i), "assignment": b"\x00\x01"} for i in range(count)
        ],
    }


def _create_topics(_version: int, count: int) -> Fields:
    return {
        "topics": [
            {
                "name": unknown_topic(i),
                "num_partitions": 1,
                "replication_factor": 1,
                "configs": [{"name": "retention.ms", "value": "60000"}],
            }
            for i in range(count)
        ],
        "timeout": 5000,
        "validate_only": True,
    }


def _delete_topics(version: int, count: int) -> Fields:
    if version >= 6:  # by name or topic id
        named = [{"name": unknown_topic(i), "topic_id": uuid.UUID(int=0)} for i in range(count)]
        return {"topics": named, "timeout": 5000}
    return {"topic_names": [unknown_topic(i) for i in range(count)], "timeout": 5000}


def _delete_records(_version: int, count: int) -> Fields:
    def partition(p: int) -> Fields:
        return {"partition_index": p, "offset": 0}

    return {"topics": topics(count, partition, "partitions"), "timeout": 5000}


def _add_partitions_to_txn(_version: int, count: int) -> Fields:
    return {
        "v3_and_below_transactional_id": transactional_id(0),
        "v3_and_below_producer_id": UNKNOWN_PRODUCER_ID,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [
            {"name": unknown_topic(i), "partitions": list(partition_range())} for i in range(count)
        ],
    }


def _txn_offset_commit(_version: int, count: int) -> Fields:
    def partition(p: int) -> Fields:
        return {"partition_index": p, "committed_offset": 0, "committed_metadata": None}

    return {
        "transactional_id": transactional_id(0),
        "group_id": GROUP,
        "producer_id": UNKNOWN_PRODUCER_ID,
        "producer_epoch": 0,
        "topics": topics(count, partition, "partitions"),
    }


def _topic_resources(count: int, configs: list[Fields] | None = None) -> list[Fields]:
    return [
        {
            "resource_type": TOPIC_RESOURCE,
            "resource_name": unknown_topic(i),
            "configs": configs or [],
        }
        for i in range(count)
    ]


def _describe_configs(_version: int, count: int) -> Fields:
    resources = _topic_resources(count)
    for resource in resources:
        resource["configuration_keys"] = ["retention.ms", "cleanup.policy"]
    return {"resources": resources}


def _alter_configs(_version: int, count: int) -> Fields:
    configs = [{"name": "retention.ms", "value": "60000"}]
    return {"resources": _topic_resources(count, configs), "validate_only": True}


def _incremental_alter_configs(_version: int, count: int) -> Fields:
    configs = [{"name": "retention.ms", "config_operation": SET, "value": "60000"}]
    return {"resources": _topic_resources(count, configs), "validate_only": True}


def _create_partitions(_version: int, count: int) -> Fields:
    return {
        "topics": [
            {"name": unknown_topic(i), "count": 2, "assignments": None} for i in range(count)
        ],
        "timeout": 5000,
        "validate_only": True,
    }


def _offset_delete(_version: int, count: int) -> Fields:
    def partition(p: int) -> Fields:
        return {"partition_index": p}

    return {"group_id": GROUP, "topics": topics(count, partition, "partitions")}


def _describe_producers(_version: int, count: int) -> Fields:
    return {
        "topics": [
            {"name": unknown_topic(i), "partition_indexes": list(partition_range())}
            for i in range(count)
        ]
    }


def _list_transactions(_version: int, count: int) -> Fields:
    return {
        "state_filters": [unknown_id("state", i) for i in range(count)],
        "producer_id_filters": [UNKNOWN_PRODUCER_ID + i for i in range(count)],
    }


UNKNOWN = ErrorCode.unknown_topic_or_partition
NO_SUCH_PRODUCER = ErrorCode.invalid_producer_id_mapping
NONE = ErrorCode.none

CASES: dict[int, ApiCase] = {
    0: ApiCase(
        _produce,
        lambda _, r: per_partition(r.responses, "partition_responses", index_field="index"),
        every_partition(UNKNOWN),
    ),
    1: ApiCase(
        _fetch,
        lambda _, r: per_partition(r.responses, "partitions", name_field="topic"),
        every_partition(UNKNOWN),
    ),
    2: ApiCase(
        _list_offsets, lambda _, r: per_partition(r.topics, "partitions"), every_partition(UNKNOWN)
    ),
    3: ApiCase(_metadata, lambda _, r: per_element(r.topics, "name"), _metadata_expected),
    8: ApiCase(
        _offset_commit, lambda _, r: per_partition(r.topics, "partitions"), every_partition(UNKNOWN)
    ),
    9: ApiCase(_offset_fetch, _offset_fetch_answers, _offset_fetch_expected),
    10: ApiCase(
        lambda _, count: {"key_type": 0, "coordinator_keys": [group_id(i) for i in range(count)]},
        lambda _, r: per_element(r.coordinators, "key"),
        every_element(group_id, NONE),
    ),
    11: ApiCase(
        _join_group,
        lambda _, r: [("error", int(r.error_code)), ("members", len(r.members))],
        constant([("error", ErrorCode.invalid_session_timeout), ("members", 0)]),
    ),
    13: ApiCase(
        lambda _, count: {
            "group_id": GROUP,
            "members": [{"member_id": unknown_id("member", i)} for i in range(count)],
        },
        lambda _, r: per_element(r.members, "member_id"),
        every_element(lambda i: unknown_id("member", i), ErrorCode.unknown_member_id),
    ),
    14: ApiCase(
        _sync_group,
        lambda _, r: [("error", int(r.error_code)), ("assignment", len(r.assignment))],
        constant([("error", ErrorCode.unknown_member_id), ("assignment", 0)]),
    ),
    15: ApiCase(
        lambda _, count: {"groups": [group_id(i) for i in range(count)]},
        lambda _, r: [((g.group_id, g.group_state), int(g.error_code)) for g in r.groups],
        lambda _, count: [((group_id(i), "Dead"), NONE) for i in range(count)],
    ),
    16: ApiCase(
        lambda _, count: {
            "states_filter": [unknown_id("state", i) for i in range(count)],
            "types_filter": [unknown_id("type", i) for i in range(count)],
        },
        lambda _, r: [("error", int(r.error_code)), ("groups", len(r.groups))],
        constant([("error", NONE), ("groups", 0)]),
    ),
    19: ApiCase(
        _create_topics,
        lambda _, r: per_element(r.topics, "name"),
        every_element(unknown_topic, ErrorCode.invalid_topic_exception),
    ),
    20: ApiCase(
        _delete_topics,
        lambda _, r: per_element(r.responses, "name"),
        every_element(unknown_topic, UNKNOWN),
    ),
    21: ApiCase(
        _delete_records,
        lambda _, r: per_partition(r.topics, "partitions"),
        every_partition(UNKNOWN),
    ),
    24: ApiCase(
        _add_partitions_to_txn,
        lambda _, r: per_partition(
            r.results_by_topic_v3_and_below,
            "results_by_partition",
            error_field="partition_error_code",
        ),
        every_partition(NO_SUCH_PRODUCER),
    ),
    28: ApiCase(
        _txn_offset_commit,
        lambda _, r: per_partition(r.topics, "partitions"),
        every_partition(NO_SUCH_PRODUCER),
    ),
    32: ApiCase(
        _describe_configs,
        lambda _, r: per_element(r.results, "resource_name"),
        every_element(unknown_topic, UNKNOWN),
    ),
    33: ApiCase(
        _alter_configs,
        lambda _, r: per_element(r.responses, "resource_name"),
        every_element(unknown_topic, UNKNOWN),
    ),
    37: ApiCase(
        _create_partitions,
        lambda _, r: per_element(r.results, "name"),
        every_element(unknown_topic, UNKNOWN),
    ),
    42: ApiCase(
        lambda _, count: {"groups_names": [group_id(i) for i in range(count)]},
        lambda _, r: per_element(r.results, "group_id"),
        every_element(group_id, ErrorCode.group_id_not_found),
    ),
    44: ApiCase(
        _incremental_alter_configs,
        lambda _, r: per_element(r.responses, "resource_name"),
        every_element(unknown_topic, UNKNOWN),
    ),
    47: ApiCase(
        _offset_delete,
        lambda _, r: [("error", int(r.error_code)), ("topics", len(r.topics))],
        constant([("error", ErrorCode.group_id_not_found), ("topics", 0)]),
    ),
    61: ApiCase(
        _describe_producers,
        lambda _, r: per_partition(r.topics, "partitions"),
        every_partition(UNKNOWN),
    ),
    65: ApiCase(
        lambda _, count: {"transactional_ids": [transactional_id(i) for i in range(count)]},
        lambda _, r: per_element(r.transaction_states, "transactional_id"),
        every_element(transactional_id, ErrorCode.transactional_id_not_found),
    ),
    66: ApiCase(
        _list_transactions,
        lambda _, r: [("error", int(r.error_code)), ("listed", len(r.transaction_states))],
        constant([("error", NONE), ("listed", 0)]),
    ),
}


# --- which versions, and frames of an exact size -----------------------------------------


def has_array(cls: type[Any]) -> bool:
    """True when the kio dataclass ``cls`` holds an array anywhere, however deep."""
    hints = typing.get_type_hints(cls)
    return any(
        _type_has_array(hints[field.name])
        for field in dataclasses.fields(cls)
        if not field.name.startswith("__")
    )


def _type_has_array(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_type_has_array(arg) for arg in typing.get_args(hint))
    return dataclasses.is_dataclass(hint) and has_array(hint)  # type: ignore[arg-type]


def versions_with_arrays(api_key: int) -> list[int]:
    """The lowest and highest served versions of ``api_key`` whose request holds an array.

    Some APIs gain their only array in a later version (FindCoordinator's batched keys in
    v4, LeaveGroup's members in v3, ListGroups' filters in v4): for those the lowest such
    version stands in for the lowest served one.
    """
    low, high = served_range(api_key)
    found = [v for v in range(low, high + 1) if has_array(codec.request_class(api_key, v))]
    return sorted({found[0], found[-1]}) if found else []


def apis_with_arrays() -> list[int]:
    return [api_key for api_key in sorted(ADVERTISED) if versions_with_arrays(api_key)]


def api_name(api_key: int, version: int) -> str:
    return codec.request_class(api_key, version).__name__.removesuffix("Request")


@dataclass(frozen=True)
class SizedRequest:
    frame: bytes  # the whole frame, size prefix included
    count: int  # elements in the request's arrays (topics, groups, ids)


def sized_request(api_key: int, version: int, correlation_id: int, body_size: int) -> SizedRequest:
    """A request of CASES[api_key] whose frame body (what its size prefix announces) is
    exactly ``body_size`` bytes: as many elements as fit, then a client id as padding."""
    build = CASES[api_key].build

    def body(count: int) -> bytes:
        return encode_body(api_key, version, build(version, count))

    one, two = len(body(1)), len(body(2))
    per_element = two - one
    flexible = codec.is_flexible(api_key, version)
    header = len(request_header(api_key, version, correlation_id, flexible=flexible, client_id=""))
    count = (body_size - header - (one - per_element) - SIZE_SLACK) // per_element
    payload = body(count)
    padding = body_size - header - len(payload)
    assert 0 <= padding <= MAX_CLIENT_ID, f"cannot pad {len(payload)} bytes to {body_size}"
    head = request_header(
        api_key, version, correlation_id, flexible=flexible, client_id="p" * padding
    )
    frame = with_size(head + payload)
    assert len(frame) == 4 + body_size
    return SizedRequest(frame, count)


def first_difference(expected: list[Answer], got: list[Answer]) -> str:
    """Empty when the answers agree; else where they first differ (lists of tens of
    thousands are too long for pytest's own diff)."""
    if len(expected) != len(got):
        return f"{len(got)} answers for {len(expected)} elements; first: {got[:2]}"
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        if want != have:
            return f"element {index}: expected {want}, got {have}"
    return ""
