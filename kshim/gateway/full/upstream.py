"""The upstream cluster as the view index reads it, through kshim's blocking wire client.

Every function here blocks on the network: the index runs them in worker threads. Requests
are at the versions kshim's own clients send (``kshim.client.request_versions``): Metadata
v11 for the leaders, DescribeConfigs v4 for ``delete.retention.ms``, ListOffsets v5 and
Fetch v12 (read_committed, KIP-98) to each partition's leader, as a consumer reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.metadata.v11.response import MetadataResponse

from kshim.client.errors import check_answer
from kshim.client.list_offsets import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    list_offsets,
)
from kshim.client.request_versions import FETCH, METADATA
from kshim.client.security import ClientSecurity
from kshim.client.topic_admin import TopicAdmin
from kshim.client.topic_reader import committed_fetch
from kshim.client.wire import WireConnection
from kshim.storage.interface import TopicPartition

Address = tuple[str, int]
TIMEOUT_S = 10.0  # every connection's read deadline; a Fetch waits far less (FETCH_MAX_WAIT_MS)
# Kafka's delete.retention.ms default (a day), for a topic whose configs cannot be read.
DEFAULT_DELETE_RETENTION_MS = 86_400_000
# Per partition and per answer: a consumer's max.partition.fetch.bytes and fetch.max.bytes
# are 1 MiB and 50 MiB; the index applies one partition's answer in one LMDB transaction.
PARTITION_MAX_BYTES = 1 << 20
FETCH_MAX_BYTES = 8 << 20
NO_LEADER = -1


class UpstreamError(Exception):
    """The upstream cluster answered with an error code for a whole request."""


@dataclass(frozen=True, slots=True)
class Leaders:
    """Metadata's answer: each broker's address, each named partition's leader and each
    named topic's id (KIP-516; a topic deleted and created again gets a new one)."""

    brokers: dict[int, Address]
    leaders: dict[TopicPartition, int]  # NO_LEADER while the partition has none
    topic_ids: dict[str, bytes]  # 16 bytes; a topic without an id (never, since Kafka 2.8) has none


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch answer."""

    error_code: int
    records: bytes  # whole batches, maybe then one partial batch
    aborted: list[tuple[int, int]]  # (producer id, first offset) of aborted transactions


def connect(addresses: Sequence[Address], security: ClientSecurity | None) -> WireConnection:
    """A connection to the first of ``addresses`` that accepts one; raises the last OSError."""
    failure: OSError = OSError("no upstream address")
    for host, port in addresses:
        try:
            return WireConnection(host, port, TIMEOUT_S, security=security)
        except OSError as error:
            failure = error
    raise failure


def describe_leaders(
    addresses: Sequence[Address], security: ClientSecurity | None, topics: Sequence[str]
) -> Leaders:
    """The leaders of ``topics``' partitions (never auto-creating a topic); a topic with an
    error (UNKNOWN_TOPIC_OR_PARTITION) has no partitions in the answer."""
    request = {"topics": [{"name": name} for name in topics], "allow_auto_topic_creation": False}
    with connect(addresses, security) as connection:
        response = connection.call_for(MetadataResponse, *METADATA, request)
    brokers = {
        int(broker.node_id): (str(broker.host), int(broker.port)) for broker in response.brokers
    }
    leaders = {
        TopicPartition(str(topic.name), int(partition.partition_index)): int(partition.leader_id)
        for topic in response.topics
        if topic.error_code == 0
        for partition in topic.partitions
    }
    topic_ids = {
        str(topic.name): topic.topic_id.bytes
        for topic in response.topics
        if topic.error_code == 0 and topic.topic_id is not None and topic.topic_id.int != 0
    }
    return Leaders(brokers, leaders, topic_ids)


def delete_retention_ms(
    addresses: Sequence[Address], security: ClientSecurity | None, topic: str
) -> int:
    """The topic's delete.retention.ms: how long the view keeps a tombstone."""
    with connect(addresses, security) as connection:
        [described] = TopicAdmin(connection).describe_topics([topic], all_configs=True)
    for entry in described.configs:
        if entry.name == "delete.retention.ms" and entry.value is not None:
            return int(entry.value)
    return DEFAULT_DELETE_RETENTION_MS


def bounds(
    connection: WireConnection, topic: str, partitions: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """(log start, last stable offset) of each partition, asked of its leader."""
    starts = list_offsets(connection, UpstreamError, topic, partitions, EARLIEST, READ_COMMITTED)
    ends = list_offsets(connection, UpstreamError, topic, partitions, LATEST, READ_COMMITTED)
    return {index: (starts[index], ends[index]) for index in partitions}


def fetch(
    connection: WireConnection, positions: Mapping[TopicPartition, int], max_wait_ms: int
) -> dict[TopicPartition, FetchedPartition]:
    """One read_committed Fetch of every partition from its position, answered once any
    record is there or after ``max_wait_ms``."""
    response = connection.call_for(FetchResponse, *FETCH, _fetch_request(positions, max_wait_ms))
    check_answer(UpstreamError, response.error_code, "cannot fetch")
    fetched = {}
    for topic in response.responses:
        for partition in topic.partitions:
            aborted = [
                (int(entry.producer_id), int(entry.first_offset))
                for entry in partition.aborted_transactions or ()
            ]
            source = TopicPartition(str(topic.topic), int(partition.partition_index))
            fetched[source] = FetchedPartition(
                int(partition.error_code), bytes(partition.records or b""), aborted
            )
    return fetched


def _fetch_request(positions: Mapping[TopicPartition, int], max_wait_ms: int) -> dict[str, object]:
    by_topic: dict[str, dict[int, int]] = {}
    for source, offset in positions.items():
        by_topic.setdefault(source.topic, {})[source.partition] = offset
    return committed_fetch(by_topic, max_wait_ms, PARTITION_MAX_BYTES, FETCH_MAX_BYTES)
