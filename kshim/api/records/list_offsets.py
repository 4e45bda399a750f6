"""ListOffsets (key 2): earliest, latest, max timestamp and offsets by timestamp.

Latest is the high watermark (the last stable offset under read_committed),
so it always agrees with what Fetch can return: Spark relies on that.

A lookup by timestamp (KIP-79) and MAX_TIMESTAMP (KIP-734) search every visible record,
transaction markers included (storage/log/timestamp_lookup.py), and, as Kafka's
Partition.fetchOffsetForTimestamp, answer only a record below what the isolation level
may read: a hit at or past the last stable offset under read_committed is no answer
(offset -1), not the next best record. No answer carries leader epoch -1, as Kafka's.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithResolver
from kshim.broker.partition_reads import ReadablePartition, TimestampHit
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kshim.storage.interface import CorruptRecords, StorageReadFailed, TopicPartition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
READ_COMMITTED = 1
NO_TIMESTAMP = -1
LEADER_EPOCH = 0  # a single broker's partitions never change leader
NO_LEADER_EPOCH = -1


async def handle(
    request: ListOffsetsRequest, context: RequestContext[WithResolver]
) -> ListOffsetsResponse:
    read_committed = request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            topic_partition = TopicPartition(topic.name, wanted.partition_index)
            try:
                partition = context.broker.resolver.readable_partition(topic_partition)
            except TopicError as error:  # a name nobody reads
                partitions.append(_answer(wanted.partition_index, ErrorCode(error.code)))
                continue
            if partition is None:
                answer = _answer(wanted.partition_index, ErrorCode.unknown_topic_or_partition)
            else:
                answer = await _looked_up(partition, wanted.partition_index, wanted.timestamp,
                                          read_committed)  # fmt: skip
            partitions.append(answer)
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _answer(
    partition_index: int, error: ErrorCode, found: TimestampHit | None = None
) -> ListOffsetsPartitionResponse:
    offset, timestamp = found if found is not None else (-1, NO_TIMESTAMP)
    return ListOffsetsPartitionResponse(
        partition_index=partition_index,
        error_code=error,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=LEADER_EPOCH if found is not None else NO_LEADER_EPOCH,
    )


async def _looked_up(
    partition: ReadablePartition, index: int, timestamp: int, read_committed: bool
) -> ListOffsetsPartitionResponse:
    """The partition's answer; a lookup by time that meets a stored batch it cannot read
    answers as Fetch does (partition_reads.LogPartition.read)."""
    try:
        found = await _lookup(partition, timestamp, read_committed)
    except CorruptRecords:
        return _answer(index, ErrorCode.corrupt_message)
    except StorageReadFailed:
        return _answer(index, ErrorCode.kafka_storage_error)
    return _answer(index, ErrorCode.none, found)


async def _lookup(
    partition: ReadablePartition, timestamp: int, read_committed: bool
) -> TimestampHit | None:
    """(offset, timestamp) of the answer; LATEST is the last stable offset under
    read_committed, EARLIEST the log start, each without a timestamp."""
    if timestamp == LATEST:
        return (await partition.offsets()).latest(read_committed), NO_TIMESTAMP
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return (await partition.offsets()).log_start_offset, NO_TIMESTAMP
    if timestamp == MAX_TIMESTAMP:
        found = await partition.offset_of_max_timestamp()
    elif timestamp >= 0:
        found = await partition.offset_for_timestamp(timestamp)
    else:
        return None
    if found is None or not read_committed:
        return found  # the log bounds it by the high watermark already
    return found if found[0] < (await partition.offsets()).last_stable_offset else None
