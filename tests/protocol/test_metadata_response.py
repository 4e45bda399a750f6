"""The hand-written Metadata response encoder, byte for byte against the typed path.

The typed path (typed response -> kio's dataclass for the version -> kio's encoder,
``messages/serial.py``) is what every Metadata answer went through before; the
hand-written encoder exists only for speed, so for every served version and any field
values it must write exactly those bytes.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages import serial
from kshim.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kshim.protocol.metadata_response import (
    FIRST_WITH_AUTHORIZED_OPERATIONS,
    FIRST_WITH_NULLABLE_TOPIC_NAME,
    MAX_VERSION,
    MIN_VERSION,
    UNKNOWN_AUTHORIZED_OPERATIONS,
    encode_metadata_response,
    encode_topic,
    with_topic_authorized_operations,
)

METADATA_KEY = 3
VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)

int32 = st.integers(-(2**31), 2**31 - 1)
texts = st.text(max_size=20)
error_codes = st.sampled_from(
    [ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_topic_exception,
     ErrorCode.unknown_topic_id, ErrorCode.leader_not_available]
)  # fmt: skip
node_lists = st.lists(int32, max_size=3)
partitions = st.builds(
    MetadataResponsePartition,
    error_code=error_codes,
    partition_index=int32,
    leader_id=int32,
    leader_epoch=int32,
    replica_nodes=node_lists,
    isr_nodes=node_lists,
    offline_replicas=node_lists,
)
brokers = st.builds(
    MetadataResponseBroker, node_id=int32, host=texts, port=int32, rack=st.none() | texts
)


def topics(nullable_name: bool) -> st.SearchStrategy[MetadataResponseTopic]:
    return st.builds(
        MetadataResponseTopic,
        error_code=error_codes,
        name=(st.none() | texts) if nullable_name else texts,
        topic_id=st.none() | st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)),
        is_internal=st.booleans(),
        partitions=st.lists(partitions, max_size=3),
        topic_authorized_operations=int32,
    )


@st.composite
def responses(draw: st.DrawFn) -> tuple[int, MetadataResponse]:
    version = draw(st.sampled_from(VERSIONS))
    nullable_name = version >= FIRST_WITH_NULLABLE_TOPIC_NAME
    response = MetadataResponse(
        throttle_time_ms=draw(st.integers(0, 2**31 - 1)),
        brokers=draw(st.lists(brokers, max_size=3)),
        cluster_id=draw(st.none() | texts),
        controller_id=draw(int32),
        topics=draw(st.lists(topics(nullable_name), max_size=4)),
        cluster_authorized_operations=draw(int32),
    )
    return version, response


def hand_written(version: int, response: MetadataResponse) -> bytes:
    return encode_metadata_response(
        version,
        response.brokers,
        response.cluster_id,
        response.controller_id,
        [encode_topic(version, topic) for topic in response.topics],
        response.throttle_time_ms,
        response.cluster_authorized_operations,
    )


@settings(max_examples=400, deadline=None)
@given(responses())
def test_metadata_response_matches_the_typed_path(case: tuple[int, MetadataResponse]) -> None:
    version, response = case
    assert hand_written(version, response) == serial.encode_response(
        METADATA_KEY, version, response
    )


@st.composite
def entries_to_patch(draw: st.DrawFn) -> tuple[int, MetadataResponseTopic, int]:
    version = draw(st.sampled_from(range(FIRST_WITH_AUTHORIZED_OPERATIONS, MAX_VERSION + 1)))
    return version, draw(topics(version >= FIRST_WITH_NULLABLE_TOPIC_NAME)), draw(int32)


@settings(max_examples=200, deadline=None)
@given(entries_to_patch())
def test_an_entry_given_its_authorized_operations_is_what_kio_writes_with_them(
    case: tuple[int, MetadataResponseTopic, int],
) -> None:
    """A kept entry with a topic's operations put in afterwards (KIP-430), in an answer,
    gives the bytes of kio's encoder for the topic carrying them."""
    version, topic, operations = case
    patched = with_topic_authorized_operations(encode_topic(version, topic), version, operations)
    response = MetadataResponse(
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=1,
        topics=[dataclasses.replace(topic, topic_authorized_operations=operations)],
        cluster_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )
    answer = encode_metadata_response(version, [], None, 1, [patched])
    assert answer == serial.encode_response(METADATA_KEY, version, response)


@pytest.mark.parametrize("version", range(MIN_VERSION, FIRST_WITH_AUTHORIZED_OPERATIONS))
def test_versions_without_authorized_operations_cannot_be_given_them(version: int) -> None:
    entry = encode_topic(version, kshim_answer().topics[0])
    with pytest.raises(ValueError, match="has no topic_authorized_operations"):
        with_topic_authorized_operations(entry, version, 0)


def kshim_answer() -> MetadataResponse:
    """What kshim's handler answers: one broker, no rack, a topic and its view, an
    auto-created topic, and the error entries (zero topic id, no partitions)."""
    node = 1

    def described(name: str, topic_id: uuid.UUID, partition_count: int) -> MetadataResponseTopic:
        return MetadataResponseTopic(
            error_code=ErrorCode.none,
            name=name,
            topic_id=topic_id,
            partitions=[
                MetadataResponsePartition(
                    error_code=ErrorCode.none,
                    partition_index=index,
                    leader_id=node,
                    leader_epoch=0,
                    replica_nodes=[node],
                    isr_nodes=[node],
                )
                for index in range(partition_count)
            ],
        )

    def error(name: str, code: ErrorCode) -> MetadataResponseTopic:
        return MetadataResponseTopic(
            error_code=code, name=name, topic_id=uuid.UUID(int=0), partitions=[]
        )

    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=node, host="localhost", port=9092)],
        cluster_id="kshim-cluster",
        controller_id=node,
        topics=[
            described("orders", uuid.UUID(int=7), 3),
            described("orders.full", uuid.UUID(int=8), 3),
            described("created-on-demand", uuid.UUID(int=9), 1),
            error("nope", ErrorCode.unknown_topic_or_partition),
            error("bad name!", ErrorCode.invalid_topic_exception),
        ],
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_kshims_own_answer_matches_the_typed_path(version: int) -> None:
    response = kshim_answer()
    assert hand_written(version, response) == serial.encode_response(
        METADATA_KEY, version, response
    )


def test_v12_answers_a_topic_asked_for_by_id_without_a_name() -> None:
    response = kshim_answer()
    response.topics = [
        MetadataResponseTopic(
            error_code=ErrorCode.unknown_topic_id,
            name=None,
            topic_id=uuid.UUID(int=0),
            partitions=[],
        )
    ]
    assert hand_written(12, response) == serial.encode_response(METADATA_KEY, 12, response)


@pytest.mark.parametrize("version", range(MIN_VERSION, FIRST_WITH_NULLABLE_TOPIC_NAME))
def test_a_null_name_is_refused_below_v12_as_kio_refuses_it(version: int) -> None:
    nameless = MetadataResponseTopic(
        error_code=ErrorCode.unknown_topic_id, name=None, topic_id=None, partitions=[]
    )
    with pytest.raises(ValueError, match="without a name"):
        encode_topic(version, nameless)
    response = kshim_answer()
    response.topics = [nameless]
    with pytest.raises(TypeError):
        serial.encode_response(METADATA_KEY, version, response)


def test_v12_field_by_field() -> None:
    """One broker and one single-partition topic, laid out as MetadataResponse.json says
    (compact strings and arrays hold length + 1; every structure ends with an empty
    tagged-field section)."""
    topic_id = uuid.UUID(int=0x0102)
    topic = MetadataResponseTopic(
        error_code=ErrorCode.none,
        name="t",
        topic_id=topic_id,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=0,
                leader_id=1,
                leader_epoch=0,
                replica_nodes=[1],
                isr_nodes=[1],
            )
        ],
    )
    broker = MetadataResponseBroker(node_id=1, host="h", port=9092)
    expected = b"".join(
        [
            bytes.fromhex("00000000"),  # throttle_time_ms
            b"\x02",  # one broker
            bytes.fromhex("00000001"),  # node_id
            b"\x02h",  # host
            bytes.fromhex("00002384"),  # port 9092
            b"\x00",  # rack: null
            b"\x00",  # the broker's tagged fields
            b"\x02c",  # cluster_id
            bytes.fromhex("00000001"),  # controller_id
            b"\x02",  # one topic
            bytes.fromhex("0000"),  # error_code
            b"\x02t",  # name
            topic_id.bytes,
            b"\x00",  # is_internal
            b"\x02",  # one partition
            bytes.fromhex("0000"),  # error_code
            bytes.fromhex("00000000"),  # partition_index
            bytes.fromhex("00000001"),  # leader_id
            bytes.fromhex("00000000"),  # leader_epoch
            b"\x02" + bytes.fromhex("00000001"),  # replica_nodes
            b"\x02" + bytes.fromhex("00000001"),  # isr_nodes
            b"\x01",  # offline_replicas: empty
            b"\x00",  # the partition's tagged fields
            UNKNOWN_AUTHORIZED_OPERATIONS.to_bytes(4, "big", signed=True),
            b"\x00",  # the topic's tagged fields
            b"\x00",  # the response's tagged fields
        ]
    )
    assert encode_metadata_response(12, [broker], "c", 1, [encode_topic(12, topic)]) == expected


@pytest.mark.parametrize("version", [MIN_VERSION - 1, MAX_VERSION + 1])
def test_versions_it_does_not_encode_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="not encoded here"):
        encode_metadata_response(version, [], None, 1, [])
    with pytest.raises(ValueError, match="not encoded here"):
        encode_topic(version, kshim_answer().topics[0])
