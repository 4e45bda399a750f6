"""The hand-written Produce and Fetch response encoders, byte for byte against kio's.

kio's generated encoder is the reference (it follows upstream's JSON schemas);
the hand-written ones exist only for speed, so for every served version and
any field values they must produce exactly kio's bytes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.protocol import codec
from kshim.protocol.fetch_response import MAX_VERSION as FETCH_MAX
from kshim.protocol.fetch_response import MIN_VERSION as FETCH_MIN
from kshim.protocol.fetch_response import FetchedPartition, FetchedTopic, encode_fetch_response
from kshim.protocol.produce_response import MAX_VERSION as PRODUCE_MAX
from kshim.protocol.produce_response import MIN_VERSION as PRODUCE_MIN
from kshim.protocol.produce_response import PartitionAnswer, encode_produce_response

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(min_size=1, max_size=20)
messages = st.none() | st.text(max_size=30)
error_codes = st.sampled_from([0, 1, 3, 10, 47, 87])

answers = st.builds(
    PartitionAnswer,
    index=int32,
    error_code=error_codes,
    base_offset=int64,
    log_append_time=st.just(-1) | st.integers(0, 2**42),  # kio: datetimes up to year 9999
    log_start_offset=int64,
    error_message=messages,
)


def kio_produce(version: int, topics: list[tuple[str, list[PartitionAnswer]]]) -> bytes:
    body = {
        "responses": [
            {
                "name": name,
                "partition_responses": [
                    {
                        "index": answer.index,
                        "error_code": answer.error_code,
                        "base_offset": answer.base_offset,
                        "log_append_time": None
                        if answer.log_append_time < 0
                        else answer.log_append_time,
                        "log_start_offset": answer.log_start_offset,
                        "record_errors": [],
                        "error_message": answer.error_message,
                    }
                    for answer in partitions
                ],
            }
            for name, partitions in topics
        ],
        "throttle_time": 0,
    }
    return codec.encode_response(0, version, body)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(PRODUCE_MIN, PRODUCE_MAX),
    st.lists(st.tuples(names, st.lists(answers, max_size=3)), max_size=3),
)
def test_produce_response_matches_kio(
    version: int, topics: list[tuple[str, list[PartitionAnswer]]]
) -> None:
    assert encode_produce_response(version, topics) == kio_produce(version, topics)


records = st.lists(st.binary(min_size=1, max_size=40), max_size=3)
partitions = st.builds(
    FetchedPartition,
    partition_index=int32,
    error_code=error_codes,
    high_watermark=st.integers(0, 2**62),
    last_stable_offset=st.integers(-1, 2**62),
    log_start_offset=st.integers(-1, 2**62),
    aborted_transactions=st.none() | st.lists(st.tuples(int64, st.integers(0, 2**62)), max_size=3),
    records=records,
)


topics = st.builds(FetchedTopic, name=names, partitions=st.lists(partitions, max_size=3))


def kio_fetch(version: int, topics: list[FetchedTopic], error_code: int, session_id: int) -> bytes:
    def partition(data: FetchedPartition) -> dict[str, Any]:
        aborted = data.aborted_transactions
        return {
            "partition_index": data.partition_index,
            "error_code": data.error_code,
            "high_watermark": data.high_watermark,
            "last_stable_offset": data.last_stable_offset,
            "log_start_offset": data.log_start_offset,
            "aborted_transactions": None
            if aborted is None
            else [{"producer_id": p, "first_offset": o} for p, o in aborted],
            "preferred_read_replica": -1,
            "records": b"".join(data.records),  # type: ignore[arg-type]
        }

    body = {
        "throttle_time": 0,
        "error_code": error_code,
        "session_id": session_id,
        "responses": [
            {"topic": topic.name, "partitions": [partition(p) for p in topic.partitions]}
            for topic in topics
        ],
    }
    return codec.encode_response(1, version, body)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(FETCH_MIN, FETCH_MAX),
    st.lists(topics, max_size=3),
    error_codes,
    int32,
)
def test_fetch_response_matches_kio(
    version: int, topics: list[FetchedTopic], error_code: int, session_id: int
) -> None:
    parts = encode_fetch_response(version, topics, error_code, session_id)
    encoded = b"".join(parts)  # type: ignore[arg-type]
    assert encoded == kio_fetch(version, topics, error_code, session_id)


def test_produce_response_refuses_versions_it_does_not_encode() -> None:
    for version in (PRODUCE_MIN - 1, PRODUCE_MAX + 1):
        try:
            encode_produce_response(version, [])
        except ValueError:
            continue
        raise AssertionError(f"v{version} was encoded")
