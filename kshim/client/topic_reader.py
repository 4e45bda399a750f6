"""``kshim tail``'s wire reads: a topic's committed records from chosen offsets, as a consumer
without a group reads them.

Requests go through kshim's own blocking client (``kshim.client.wire``), so the command
needs no client library and works against any Kafka broker: Metadata v11 for the
partitions, ListOffsets v5 for where to start and Fetch v12 (the last version without topic
ids, KIP-516) for the records, all to the bootstrap broker, which leads every partition of
a single broker. Reads are read_committed (KIP-98): Fetch stops at the last stable offset,
and the records of aborted transactions, which it still returns, are dropped here as
Kafka's consumer drops them (CompletedFetch: the aborted-transaction list, then the
ABORT markers). Batches are decoded, and decompressed, by ``kshim.protocol.records``.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.fetch.v12.response import FetchResponse, PartitionData
from kio.schema.metadata.v11.response import MetadataResponse

from kshim.client.admin_connection import ConnectionClient
from kshim.client.list_offsets import (
    CONSUMER_REPLICA_ID,
    NO_LEADER_EPOCH,
    READ_COMMITTED,
    list_offsets,
)
from kshim.client.request_versions import FETCH, METADATA
from kshim.client.wire import WireConnection
from kshim.protocol.errors import ErrorCode
from kshim.protocol.primitives import DecodeError
from kshim.protocol.record_batch import BatchHeader, InvalidBatch, iter_batches
from kshim.protocol.records import Header, Record, decode_records

NO_SESSION_ID, NO_SESSION_EPOCH = 0, -1  # a full fetch outside any fetch session (KIP-227)
# A consumer's defaults: fetch.max.bytes is 50 MiB and max.partition.fetch.bytes 1 MiB;
# a tool printing records needs less at a time.
FETCH_MAX_BYTES = 8 << 20
PARTITION_MAX_BYTES = 1 << 20
# A control record's key: version int16, type int16 (ControlRecordType: 0 ABORT, 1 COMMIT).
CONTROL_KEY = struct.Struct(">hh")
ABORT_MARKER = 0


class ReadError(Exception):
    """The broker answered a read with an error, or sent a batch that does not decode."""


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """One record as ``kshim tail`` prints it."""

    partition: int
    offset: int
    timestamp: int  # epoch milliseconds; -1 for none
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


class TopicReader(ConnectionClient):
    """Reads one topic over one connection; keeps a position per partition, moved past
    every batch it was given."""

    error = ReadError

    def __init__(self, connection: WireConnection, topic: str) -> None:
        super().__init__(connection)
        self.topic = topic
        self.positions: dict[int, int] = {}

    def partitions(self) -> list[int]:
        """The topic's partition numbers; raises ReadError for a topic that does not exist
        (never auto-created)."""
        request = {"topics": [{"name": self.topic}], "allow_auto_topic_creation": False}
        [described] = self._call(MetadataResponse, METADATA, request).topics
        self._check(described.error_code, f"cannot read topic {self.topic}")
        return sorted(int(partition.partition_index) for partition in described.partitions)

    def offsets(self, partitions: Sequence[int], timestamp: int) -> dict[int, int]:
        """ListOffsets: EARLIEST (the log start) or LATEST (the last stable offset, the
        end of what read_committed can read) of each partition."""
        return list_offsets(
            self._connection, self.error, self.topic, partitions, timestamp, READ_COMMITTED
        )

    def fetch(self, max_wait_ms: int) -> tuple[list[ReadRecord], list[int]]:
        """One Fetch of every partition from its position, answered once any record is
        there or after ``max_wait_ms``: the records read, in offset order per partition,
        and the partitions whose position was out of range (moved by retention), which
        the caller places again."""
        response = self._call(FetchResponse, FETCH, self._fetch_request(max_wait_ms))
        self._check(response.error_code, f"cannot fetch from {self.topic}")
        records: list[ReadRecord] = []
        out_of_range: list[int] = []
        for topic in response.responses:
            for partition in topic.partitions:
                index = int(partition.partition_index)
                if partition.error_code == ErrorCode.offset_out_of_range:
                    out_of_range.append(index)
                    continue
                self._check(partition.error_code, f"cannot fetch from {self.topic}-{index}")
                records += self._take(index, partition)
        return records, out_of_range

    def _take(self, index: int, partition: PartitionData) -> list[ReadRecord]:
        """The visible records of one partition's answer; moves its position past every
        whole batch, shown or not (control batches, aborted ones, the empty batches of a
        compacted range), so the next fetch starts after them."""
        data = bytes(partition.records or b"")
        position = self.positions[index]
        aborted = [
            (int(t.first_offset), int(t.producer_id)) for t in partition.aborted_transactions or ()
        ]
        try:
            records, next_offset = visible_records(data, aborted, position)
        except (DecodeError, InvalidBatch) as error:
            raise ReadError(
                f"cannot decode {self.topic}-{index} at offset {position}: {error}"
            ) from error
        self.positions[index] = max(position, next_offset)
        return [
            ReadRecord(
                index, record.offset, record.timestamp, record.key, record.value, record.headers
            )
            for record in records
        ]

    def _fetch_request(self, max_wait_ms: int) -> dict[str, object]:
        return committed_fetch({self.topic: self.positions}, max_wait_ms)


def committed_fetch(
    positions: Mapping[str, Mapping[int, int]],
    max_wait_ms: int,
    partition_max_bytes: int = PARTITION_MAX_BYTES,
    max_bytes: int = FETCH_MAX_BYTES,
) -> dict[str, object]:
    """A read_committed Fetch (v12's fields) of each topic's partitions from their
    positions, as a consumer without a fetch session sends it."""
    topics = [
        {
            "topic": topic,
            "partitions": [
                {
                    "partition": partition,
                    "current_leader_epoch": NO_LEADER_EPOCH,
                    "fetch_offset": offset,
                    "last_fetched_epoch": NO_LEADER_EPOCH,
                    "log_start_offset": -1,  # a follower's; none for a consumer
                    "partition_max_bytes": partition_max_bytes,
                }
                for partition, offset in sorted(wanted.items())
            ],
        }
        for topic, wanted in sorted(positions.items())
    ]
    return {
        "replica_id": CONSUMER_REPLICA_ID,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": READ_COMMITTED,
        "session_id": NO_SESSION_ID,
        "session_epoch": NO_SESSION_EPOCH,
        "topics": topics,
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def visible_records(
    data: bytes, aborted: Iterable[tuple[int, int]], fetch_offset: int
) -> tuple[list[Record], int]:
    """(records a read_committed consumer sees, the offset after the last whole batch) of
    one partition's fetched batches; ``aborted`` holds the answer's (first offset,
    producer id) of aborted transactions. A batch may start before ``fetch_offset`` (a
    compressed batch is sent whole); its earlier records were read before."""
    pending = sorted(aborted)  # a heap by first offset
    aborting: set[int] = set()
    records: list[Record] = []
    next_offset = fetch_offset
    for start, header in iter_batches(data):
        next_offset = header.next_offset
        while pending and pending[0][0] <= header.last_offset:
            aborting.add(heapq.heappop(pending)[1])
        batch = data[start : start + header.size]
        if _ends_abort(header, batch):
            aborting.discard(header.producer_id)
        elif header.is_control or (header.is_transactional and header.producer_id in aborting):
            continue
        else:
            records += [
                record for record in decode_records(batch)[1] if record.offset >= fetch_offset
            ]
    return records, next_offset


def _ends_abort(header: BatchHeader, batch: bytes) -> bool:
    """True for a control batch holding an ABORT marker: the producer's aborted
    transaction ends there, and its later batches are read again."""
    if not header.is_control:
        return False
    for record in decode_records(batch)[1]:
        if record.key is not None and len(record.key) >= CONTROL_KEY.size:
            marker_type: int = CONTROL_KEY.unpack_from(record.key)[1]
            return marker_type == ABORT_MARKER
    return False
