"""Large, harmless requests for every served API, and what the broker must answer to each.

A request here is grown by its arrays (topics, partitions, groups, ids) until its frame
body has an exact size, so a test can put it on either side of the broker's receive
thresholds: the 16 KiB staging buffer and the 1 MiB part size (kshim/protocol/framing.py).
Every element names something that does not exist or that Kafka refuses (topic names
with '!', outside [a-zA-Z0-9._-]), and requests that could change state say
validate_only where they can, so however many elements there are nothing is created,
deleted or committed.

An ``ApiCase`` builds its request (kio field names, any version) and says what the
answer must hold: for each element asked about, in order, the expected error code. The
few APIs that answer a request as a whole (JoinGroup, SyncGroup, ListGroups,
ListTransactions, OffsetDelete) are checked on a short summary instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kshim.broker.topics import MAX_RECORDS_PER_REQUEST
from kshim.client.frames import encode_body, request_header, with_size
from kshim.protocol import codec
from kshim.protocol.errors import ErrorCode
from kshim.protocol.framing import FRAME_SIZE
from tests.bad_input_support import make_batch

KIB, MIB = 1 << 10, 1 << 20
# Kafka's longest legal topic name (Topic.MAX_NAME_LENGTH); ids are as long, so that an
# 8 MiB request holds tens of thousands of elements, not millions.
NAME_LENGTH = 249
PARTITIONS = range(2)  # of each requested topic
# A client id holds up to 32767 bytes (an int16 length): it pads a frame to its exact size.
MAX_CLIENT_ID = 32767
# Padding left over the estimate, so that array counts growing into longer varints
# (compact encodings, KIP-482) never push a frame past its size.
SIZE_SLACK = 16
GROUP = "large-requests-group"
UNKNOWN_PRODUCER_ID = 1 << 40
TOPIC_RESOURCE = 2
SET = 0  # IncrementalAlterConfigs operation
LATEST = -1  # ListOffsets timestamp
BATCH = make_batch([b"large-requests"])  # one small valid record batch
NONE = ErrorCode.none
UNKNOWN = ErrorCode.unknown_topic_or_partition
NO_SUCH_PRODUCER = ErrorCode.invalid_producer_id_mapping  # no such transactional id

Answer = tuple[Hashable, Hashable]  # (which element, or which part of the answer; what it says)
Fields = dict[str, Any]
Build = Callable[[int, int], Fields]  # (version, element count) -> request fields


@cache
def unknown_topic(index: int) -> str:
    """A topic name no broker creates: '!' is not a legal topic name character."""
    return f"large!{index:08d}!".ljust(NAME_LENGTH, "x")


@cache
def unknown_id(kind: str, index: int) -> str:
    """A group, member, transactional, protocol or filter id that nothing uses."""
    return f"large-{kind}-{index:08d}-".ljust(NAME_LENGTH, "x")


def group_id(index: int) -> str:
    return unknown_id("group", index)


def member_id(index: int) -> str:
    return unknown_id("member", index)


def transactional_id(index: int) -> str:
    return unknown_id("transaction", index)


# --- request builders ----------------------------------------------------------------------


def topics_request(
    partition: Callable[[int], Any],
    topics: str = "topics",
    name: str = "name",
    partitions: str = "partitions",
    **fields: Any,
) -> Build:
    """Requests naming ``count`` unknown topics, each with PARTITIONS built by ``partition``."""
    return lambda _version, count: {
        **fields,
        topics: [
            {name: unknown_topic(i), partitions: [partition(p) for p in PARTITIONS]}
            for i in range(count)
        ],
    }


def ids_request(field: str, name: Callable[[int], Any], **fields: Any) -> Build:
    """Requests whose array ``field`` holds ``count`` items ``name(i)``."""
    return lambda _version, count: {**fields, field: [name(i) for i in range(count)]}


def resources_request(resource: Fields, **fields: Any) -> Build:
    """Config requests about ``count`` unknown topics, each resource also holding ``resource``
    (the configs to change, or the keys to describe)."""
    return ids_request(
        "resources",
        lambda i: {"resource_type": TOPIC_RESOURCE, "resource_name": unknown_topic(i), **resource},
        **fields,
    )


def indexes_request() -> Build:
    return topics_request(lambda p: p, partitions="partition_indexes")


def offset_fetch(version: int, count: int) -> Fields:
    group = {"group_id": GROUP, **indexes_request()(version, count)}
    return {"groups": [group]} if version >= 8 else group  # v8+ batch groups (KIP-709)


def delete_topics(version: int, count: int) -> Fields:
    if version < 6:
        return ids_request("topic_names", unknown_topic, timeout=5000)(version, count)

    def by_name(index: int) -> Fields:  # v6 names a topic or gives its id
        return {"name": unknown_topic(index), "topic_id": uuid.UUID(int=0)}

    return ids_request("topics", by_name, timeout=5000)(version, count)


# --- what the answers must say ---------------------------------------------------------------


@dataclass(frozen=True)
class ApiCase:
    build: Build
    # (version, decoded response) -> what it says, per element or as a whole
    answers: Callable[[int, Any], list[Answer]]
    # (version, element count) -> what it must say
    expected: Callable[[int, int], list[Answer]]


def per_partition(build: Build, path: str, error: int) -> ApiCase:
    """An API answering each requested partition with an error code. ``path`` names the
    answer's fields: "topics.name.partitions.partition_index", then the error code's
    field when it is not "error_code"."""
    topics, name, partitions, index, error_field = (path + ".error_code").split(".")[:5]

    def answers(_version: int, response: Any) -> list[Answer]:
        return [
            ((getattr(topic, name), getattr(part, index)), int(getattr(part, error_field)))
            for topic in getattr(response, topics)
            for part in getattr(topic, partitions)
        ]

    def expected(_version: int, count: int) -> list[Answer]:
        return [((unknown_topic(i), p), error) for i in range(count) for p in PARTITIONS]

    return ApiCase(build, answers, expected)


def element_answers(path: str) -> Callable[[int, Any], list[Answer]]:
    """(key, error code) of each item of an answer's array; ``path`` is "items.key"."""
    items, key = path.split(".")
    return lambda _version, response: [
        (getattr(item, key), int(item.error_code)) for item in getattr(response, items)
    ]


def per_element(build: Build, path: str, name: Callable[[int], str], error: int) -> ApiCase:
    """An API answering each requested item (``name(i)``) with an error code."""
    return ApiCase(
        build, element_answers(path), lambda _, count: [(name(i), error) for i in range(count)]
    )


def as_a_whole(build: Build, error: int, items: str) -> ApiCase:
    """An API answering the request as a whole: its error code, and no ``items``."""

    def answers(_version: int, response: Any) -> list[Answer]:
        return [("error", int(response.error_code)), (items, len(getattr(response, items)))]

    return ApiCase(build, answers, lambda _, __: [("error", error), (items, 0)])


def create_topics_case() -> ApiCase:
    """Every name is refused on its own, up to MAX_RECORDS_PER_REQUEST topics of a
    partition each; past that, Kafka's controller refuses the request whole, before it
    looks at a name: every topic POLICY_VIOLATION (ReplicationControlManager's
    validateTotalNumberOfPartitions)."""

    def expected(_version: int, count: int) -> list[Answer]:
        whole = count * NEW_TOPIC_PARTITIONS > MAX_RECORDS_PER_REQUEST
        error = ErrorCode.policy_violation if whole else ErrorCode.invalid_topic_exception
        return [(unknown_topic(i), error) for i in range(count)]

    return ApiCase(CREATE_TOPICS, element_answers("topics.name"), expected)


def metadata_case() -> ApiCase:
    # Kafka answers INVALID_TOPIC_EXCEPTION for a name it refuses, whether or not the
    # request allows auto-creation (KafkaApis.getTopicMetadata, AutoTopicCreationManager);
    # kshim has answered that or UNKNOWN_TOPIC_OR_PARTITION depending on the version. This
    # test is about size, so either will do, as long as every topic gets one of them.
    refused = (ErrorCode.invalid_topic_exception, UNKNOWN)

    def answers(_version: int, response: Any) -> list[Answer]:
        return [
            (topic.name, "refused" if topic.error_code in refused else int(topic.error_code))
            for topic in response.topics
        ]

    return ApiCase(
        ids_request(
            "topics", lambda i: {"name": unknown_topic(i)}, allow_auto_topic_creation=False
        ),
        answers,
        lambda _, count: [(unknown_topic(i), "refused") for i in range(count)],
    )


def offset_fetch_case() -> ApiCase:
    # No error and offset -1 for every partition: nothing was ever committed.
    def answers(version: int, response: Any) -> list[Answer]:
        groups = response.groups if version >= 8 else [response]
        return [
            ((topic.name, part.partition_index), (int(part.error_code), part.committed_offset))
            for group in groups
            for topic in group.topics
            for part in topic.partitions
        ]

    def expected(_version: int, count: int) -> list[Answer]:
        return [((unknown_topic(i), p), (NONE, -1)) for i in range(count) for p in PARTITIONS]

    return ApiCase(offset_fetch, answers, expected)


def describe_groups_case() -> ApiCase:
    # An unknown group is described as Dead, with no error (GROUP_ID_NOT_FOUND is v6+).
    def answers(_version: int, response: Any) -> list[Answer]:
        return [((g.group_id, g.group_state), int(g.error_code)) for g in response.groups]

    def expected(_version: int, count: int) -> list[Answer]:
        return [((group_id(i), "Dead"), NONE) for i in range(count)]

    return ApiCase(ids_request("groups", group_id), answers, expected)


def filters_request(*fields: str) -> Build:
    """Requests whose filter arrays ``fields`` each hold ``count`` unknown values."""
    return lambda _version, count: {
        field: [unknown_id(field, i) for i in range(count)] for field in fields
    }


def list_transactions(version: int, count: int) -> Fields:
    return {
        **filters_request("state_filters")(version, count),
        "producer_id_filters": [UNKNOWN_PRODUCER_ID + i for i in range(count)],
    }


def user_name(index: int) -> str:
    return unknown_id("user", index)


def in_order(build: Build, items: str, error: int) -> ApiCase:
    """An API answering each requested item, in order, with an error code and no key
    (CreateAcls' results, DeleteAcls' filter results)."""

    def answers(_version: int, response: Any) -> list[Answer]:
        return [(i, int(item.error_code)) for i, item in enumerate(getattr(response, items))]

    return ApiCase(build, answers, lambda _, count: [(i, error) for i in range(count)])


# An ACL for, or a filter naming, an unknown topic: refused with SECURITY_DISABLED, since the
# broker under test runs without an authoriser.
ACL = {
    "resource_type": TOPIC_RESOURCE, "resource_pattern_type": 3, "host": "*",
    "operation": 3, "permission_type": 3,
}  # fmt: skip
ACL_FILTER = {
    "resource_type_filter": TOPIC_RESOURCE, "pattern_type_filter": 3, "host_filter": None,
    "operation": 3, "permission_type": 3,
}  # fmt: skip
COMMIT = {"committed_offset": 0, "committed_metadata": None}
SET_RETENTION = {"name": "retention.ms", "value": "60000"}
NEW_TOPIC_PARTITIONS = 1
NEW_TOPIC = {
    "num_partitions": NEW_TOPIC_PARTITIONS, "replication_factor": 1, "configs": [SET_RETENTION]
}  # fmt: skip
ADMIN = {"timeout": 5000, "validate_only": True}
TXN: Fields = {
    "transactional_id": transactional_id(0),
    "producer_id": UNKNOWN_PRODUCER_ID,
    "producer_epoch": 0,
}
TXN_V3: Fields = {f"v3_and_below_{key}": value for key, value in TXN.items()}
PRODUCE = topics_request(
    lambda p: {"index": p, "records": None if p % 2 else BATCH},  # a batch or none
    "topic_data", partitions="partition_data", acks=-1, timeout=5000,
)  # fmt: skip
FETCH = topics_request(
    lambda p: {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1024},
    name="topic", replica_id=-1, max_wait=0, min_bytes=1, max_bytes=MIB,
)  # fmt: skip
# Generation -1 and no member: a standalone commit, allowed for an unknown group.
OFFSET_COMMIT = topics_request(
    lambda p: {"partition_index": p, **COMMIT},
    group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
)  # fmt: skip
# A session timeout below group.min.session.timeout.ms: refused before a group exists.
JOIN_GROUP = ids_request(
    "protocols", lambda i: {"name": unknown_id("protocol", i), "metadata": b"1"},
    group_id=GROUP, session_timeout=1, rebalance_timeout=1, member_id="", protocol_type="consumer",
)  # fmt: skip
SYNC_GROUP = ids_request(
    "assignments", lambda i: {"member_id": member_id(i), "assignment": b"1"},
    group_id=GROUP, generation_id=1, member_id=member_id(0),
)  # fmt: skip
LEAVE_GROUP = ids_request("members", lambda i: {"member_id": member_id(i)}, group_id=GROUP)
CREATE_TOPICS = ids_request("topics", lambda i: {"name": unknown_topic(i), **NEW_TOPIC}, **ADMIN)
CREATE_PARTITIONS = ids_request(
    "topics", lambda i: {"name": unknown_topic(i), "count": 2, "assignments": None}, **ADMIN
)
DELETE_RECORDS = topics_request(lambda p: {"partition_index": p, "offset": 0}, timeout=5000)
INCREMENTAL_CHANGE = [{**SET_RETENTION, "config_operation": SET}]

CASES: dict[int, ApiCase] = {
    0: per_partition(PRODUCE, "responses.name.partition_responses.index", UNKNOWN),
    1: per_partition(FETCH, "responses.topic.partitions.partition_index", UNKNOWN),
    2: per_partition(
        topics_request(lambda p: {"partition_index": p, "timestamp": LATEST}, replica_id=-1),
        "topics.name.partitions.partition_index",
        UNKNOWN,
    ),
    3: metadata_case(),
    8: per_partition(OFFSET_COMMIT, "topics.name.partitions.partition_index", UNKNOWN),
    9: offset_fetch_case(),
    10: per_element(
        ids_request("coordinator_keys", group_id, key_type=0), "coordinators.key", group_id, NONE
    ),
    11: as_a_whole(JOIN_GROUP, ErrorCode.invalid_session_timeout, "members"),
    13: per_element(LEAVE_GROUP, "members.member_id", member_id, ErrorCode.unknown_member_id),
    14: as_a_whole(SYNC_GROUP, ErrorCode.unknown_member_id, "assignment"),
    15: describe_groups_case(),
    16: as_a_whole(filters_request("states_filter", "types_filter"), NONE, "groups"),
    19: create_topics_case(),
    20: per_element(delete_topics, "responses.name", unknown_topic, UNKNOWN),
    21: per_partition(DELETE_RECORDS, "topics.name.partitions.partition_index", UNKNOWN),
    24: per_partition(
        topics_request(lambda p: p, "v3_and_below_topics", **TXN_V3),
        "results_by_topic_v3_and_below.name.results_by_partition.partition_index"
        ".partition_error_code",
        NO_SUCH_PRODUCER,
    ),
    # Partitions of topics that do not exist are refused before the transaction is looked
    # at, as KafkaApis does (compat_tests/test_txn_offset_fencing.py).
    28: per_partition(
        topics_request(lambda p: {"partition_index": p, **COMMIT}, group_id=GROUP, **TXN),
        "topics.name.partitions.partition_index",
        UNKNOWN,
    ),
    32: per_element(
        resources_request({"configuration_keys": ["retention.ms"]}),
        "results.resource_name",
        unknown_topic,
        UNKNOWN,
    ),
    33: per_element(
        resources_request({"configs": [SET_RETENTION]}, validate_only=True),
        "responses.resource_name",
        unknown_topic,
        UNKNOWN,
    ),
    37: per_element(CREATE_PARTITIONS, "results.name", unknown_topic, UNKNOWN),
    42: per_element(
        ids_request("groups_names", group_id),
        "results.group_id",
        group_id,
        ErrorCode.group_id_not_found,
    ),
    44: per_element(
        resources_request({"configs": INCREMENTAL_CHANGE}, validate_only=True),
        "responses.resource_name",
        unknown_topic,
        UNKNOWN,
    ),
    47: as_a_whole(
        topics_request(lambda p: {"partition_index": p}, group_id=GROUP),
        ErrorCode.group_id_not_found,
        "topics",
    ),
    61: per_partition(indexes_request(), "topics.name.partitions.partition_index", UNKNOWN),
    65: per_element(
        ids_request("transactional_ids", transactional_id),
        "transaction_states.transactional_id",
        transactional_id,
        ErrorCode.transactional_id_not_found,
    ),
    66: as_a_whole(list_transactions, NONE, "transaction_states"),
    30: in_order(
        ids_request(
            "creations",
            lambda i: {
                **ACL,
                "resource_name": unknown_topic(i),
                "principal": "User:" + user_name(i),
            },
        ),
        "results",
        ErrorCode.security_disabled,
    ),
    31: in_order(
        ids_request(
            "filters",
            lambda i: {
                **ACL_FILTER,
                "resource_name_filter": unknown_topic(i),
                "principal_filter": "User:" + user_name(i),
            },
        ),
        "filter_results",
        ErrorCode.security_disabled,
    ),
    50: per_element(
        ids_request("users", lambda i: {"name": user_name(i)}),
        "results.user",
        user_name,
        ErrorCode.resource_not_found,
    ),
    51: per_element(
        ids_request("deletions", lambda i: {"name": user_name(i), "mechanism": 1}, upsertions=[]),
        "results.user",
        user_name,
        ErrorCode.resource_not_found,
    ),
}


# --- frames of an exact size ---------------------------------------------------------------


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

    def header(client_id: str) -> bytes:
        flexible = codec.is_flexible(api_key, version)
        return request_header(
            api_key, version, correlation_id, flexible=flexible, client_id=client_id
        )

    one, two = len(body(1)), len(body(2))
    per_element = two - one
    count = (body_size - len(header("")) - (one - per_element) - SIZE_SLACK) // per_element
    payload = body(count)
    padding = body_size - len(header("")) - len(payload)
    assert 0 <= padding <= MAX_CLIENT_ID, f"cannot pad {len(payload)} bytes to {body_size}"
    frame = with_size(header("p" * padding) + payload)
    assert len(frame) == FRAME_SIZE.size + body_size
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
