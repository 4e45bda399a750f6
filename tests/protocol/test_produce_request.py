"""The hand-written Produce request decoder against kio's, and on broken bodies."""

from __future__ import annotations

import datetime
import importlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from kshim.protocol import codec
from kshim.protocol.primitives import DecodeError
from kshim.protocol.produce_request import (
    MAX_VERSION,
    MIN_VERSION,
    ProduceRequest,
    decode_produce_request,
)

PRODUCE = 0
partitions = st.lists(
    st.tuples(st.integers(-(2**31), 2**31 - 1), st.none() | st.binary(max_size=60)), max_size=3
)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=12), partitions), max_size=3)
requests = st.tuples(
    st.none() | st.text(max_size=12), st.sampled_from([-1, 0, 1]), st.integers(0, 2**31 - 1), topics
)
Fields = tuple[str | None, int, int, list[tuple[str, list[tuple[int, bytes | None]]]]]


def kio_encoded(version: int, fields: Fields) -> bytes:
    transactional_id, acks, timeout_ms, topic_list = fields
    cls = codec.request_class(PRODUCE, version)
    module = importlib.import_module(cls.__module__)
    request = cls(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            module.TopicProduceData(
                name=name,
                partition_data=tuple(
                    module.PartitionProduceData(index=index, records=records)
                    for index, records in partition_list
                ),
            )
            for name, partition_list in topic_list
        ),
    )
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, request)
    return buffer.getvalue()


def plain(request: ProduceRequest) -> Fields:
    return (
        request.transactional_id,
        request.acks,
        request.timeout_ms,
        [
            (
                topic.name,
                [
                    (p.index, None if p.records is None else bytes(p.records))
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ],
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(MIN_VERSION, MAX_VERSION), requests)
def test_decodes_what_kio_encodes(version: int, fields: Fields) -> None:
    body = kio_encoded(version, fields)
    ours = decode_produce_request(version, b"prefix" + body, len(b"prefix"))
    assert plain(ours) == fields
    theirs = codec.decode_request(PRODUCE, version, body, 0)
    assert [t.name for t in theirs.topic_data] == [t.name for t in ours.topic_data]


def test_record_sets_are_views_of_the_frame() -> None:
    body = kio_encoded(9, (None, -1, 1000, [("t", [(0, b"batch-bytes")])]))
    records = decode_produce_request(9, body, 0).topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is body


@settings(max_examples=300, deadline=None)
@given(st.integers(MIN_VERSION, MAX_VERSION), requests, st.data())
def test_truncated_bodies_raise_decode_error(
    version: int, fields: Fields, data: st.DataObject
) -> None:
    body = kio_encoded(version, fields)
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(DecodeError):
        decode_produce_request(version, body[:cut], 0)


@settings(max_examples=300, deadline=None)
@given(st.integers(MIN_VERSION, MAX_VERSION), st.binary(max_size=80))
def test_garbage_raises_decode_error_or_decodes(version: int, body: bytes) -> None:
    try:
        request = decode_produce_request(version, body, 0)
    except DecodeError:
        return
    for topic in request.topic_data:  # whatever decoded lies inside the body
        for partition in topic.partition_data:
            assert partition.records is None or len(partition.records) <= len(body)


def test_huge_array_count_is_refused_before_allocating() -> None:
    body = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x7f\xff\xff\xff"
    with pytest.raises(DecodeError, match="array of"):
        decode_produce_request(3, body, 0)


def test_versions_outside_the_served_range_are_refused() -> None:
    with pytest.raises(DecodeError):
        decode_produce_request(MIN_VERSION - 1, b"", 0)
