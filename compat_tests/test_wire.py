"""Raw protocol behaviour every client depends on, sent byte for byte (no client library).

- ApiVersions above the broker's maximum: the KIP-511 fallback (docs/protocol-notes.md §3.1).
- Another API at a version the broker does not serve: the connection is closed.
- ListOffsets LATEST after multi-record batches is the high watermark Fetch reports.
- A Fetch that may not wait (MaxWaitMs 0, MinBytes 0) returns the data available.
"""

from __future__ import annotations

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.deviations import (
    TANSU_API_VERSIONS_FALLBACK,
    TANSU_IMMEDIATE_FETCH,
    TANSU_LATEST_OFFSET,
    deviates,
)
from compat_tests.support import create_topic, halves, reference
from kshim.client.frames import split_response
from kshim.client.wire import ConnectionClosedError, WireConnection
from tests.e2e.client_helpers import sample_records

pytestmark = [pytest.mark.wire, pytest.mark.timeout(60)]

API_VERSIONS, METADATA, LIST_OFFSETS, FETCH = 18, 3, 2, 1
UNSUPPORTED_VERSION = 35
FUTURE_VERSION = 99
RECORDS = 10
LATEST = -1


def api_versions_v0(broker: BrokerUnderTest) -> dict[int, tuple[int, int]]:
    with WireConnection(broker.host, broker.port) as connection:
        response = connection.call(API_VERSIONS, 0, {})
    assert int(response.error_code) == 0
    return {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}


@pytest.mark.compat_smoke
def test_api_versions_v0_lists_the_core_apis(broker: BrokerUnderTest) -> None:
    """Every client's first request; aiokafka only ever sends v0."""
    ranges = api_versions_v0(broker)

    core = {0, 1, 2, 3, 10, 18, 19, 20, 22}  # produce, fetch, offsets, metadata, admin
    assert core <= set(ranges)
    assert all(low <= high for low, high in ranges.values())
    assert ranges[API_VERSIONS][0] == 0


@pytest.mark.compat_smoke
@deviates(TANSU_API_VERSIONS_FALLBACK)
def test_api_versions_above_the_maximum_gets_the_v0_fallback(broker: BrokerUnderTest) -> None:
    """A v0 body with UNSUPPORTED_VERSION and ApiVersions' own range, under header v0.

    The request uses header v2 (ApiVersions v3+ does, even at unknown versions); its body
    is not parsed, so an empty v3-style body is as good as any.
    """
    low, high = api_versions_v0(broker)[API_VERSIONS]
    with WireConnection(broker.host, broker.port) as connection:
        frame = connection.exchange(API_VERSIONS, FUTURE_VERSION, b"\x00\x00\x00", flexible=True)
    _, body = split_response(API_VERSIONS, 0, frame)

    expected = (
        UNSUPPORTED_VERSION.to_bytes(2, "big")
        + (1).to_bytes(4, "big")  # one entry: ApiVersions itself (KIP-511)
        + API_VERSIONS.to_bytes(2, "big")
        + low.to_bytes(2, "big")
        + high.to_bytes(2, "big")
    )
    assert body == expected


def test_unsupported_version_of_another_api_closes_the_connection(broker: BrokerUnderTest) -> None:
    """Kafka cannot parse the header of an unknown version, so it closes
    (docs/protocol-notes.md §3.1)."""
    with (
        WireConnection(broker.host, broker.port) as connection,
        pytest.raises(ConnectionClosedError),
    ):
        connection.exchange(METADATA, FUTURE_VERSION, b"\x00", flexible=True)


@pytest.mark.compat_smoke
@deviates(TANSU_LATEST_OFFSET)
def test_list_offsets_latest_equals_the_fetch_high_watermark(broker: BrokerUnderTest) -> None:
    topic = create_topic(broker, "latest")
    records = sample_records(RECORDS)
    assert reference().produce(broker.bootstrap, topic, halves(records)) == list(range(RECORDS))

    with WireConnection(broker.host, broker.port) as connection:
        listed = connection.call(LIST_OFFSETS, 1, list_offsets_request(topic, LATEST))
        fetched = connection.call(FETCH, 4, fetch_request(topic, max_wait=500, min_bytes=1))

    [[listed_partition]] = [topic_answer.partitions for topic_answer in listed.topics]
    [[fetched_partition]] = [topic_answer.partitions for topic_answer in fetched.responses]
    assert (int(listed_partition.error_code), listed_partition.offset) == (0, RECORDS)
    assert (int(fetched_partition.error_code), fetched_partition.high_watermark) == (0, RECORDS)


@deviates(TANSU_IMMEDIATE_FETCH)
def test_fetch_without_waiting_returns_the_available_data(broker: BrokerUnderTest) -> None:
    topic = create_topic(broker, "immediate")
    records = sample_records(RECORDS)
    assert reference().produce(broker.bootstrap, topic, [records]) == list(range(RECORDS))

    with WireConnection(broker.host, broker.port) as connection:
        fetched = connection.call(FETCH, 4, fetch_request(topic, max_wait=0, min_bytes=0))

    [answer] = fetched.responses
    [partition] = answer.partitions
    assert (answer.topic, partition.partition_index, int(partition.error_code)) == (topic, 0, 0)
    assert (partition.high_watermark, partition.last_stable_offset) == (RECORDS, RECORDS)
    assert len(partition.records or b"") > 0


def list_offsets_request(topic: str, timestamp: int) -> dict[str, object]:
    return {
        "replica_id": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
    }


def fetch_request(topic: str, max_wait: int, min_bytes: int) -> dict[str, object]:
    return {
        "replica_id": -1,
        "max_wait": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
