"""ListOffsets (key 2): earliest, latest, max timestamp and offsets by timestamp.

Latest is the high watermark (the last stable offset under read_committed),
so it always agrees with what Fetch can return: Spark relies on that.
"""

from __future__ import annotations

from kshim.broker.context import RequestContext
from kshim.broker.partition_reads import ReadablePartition, TimestampHit
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kshim.storage.interface import TopicPartition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
READ_COMMITTED = 1
NO_TIMESTAMP = -1
LEADER_EPOCH = 0  # a single broker's partitions never change leader


async def handle(request: ListOffsetsRequest, context: RequestContext) -> ListOffsetsResponse:
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
                found = await _lookup(partition, wanted.timestamp, read_committed)
                answer = _answer(wanted.partition_index, ErrorCode.none, found)
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
        leader_epoch=LEADER_EPOCH,
    )


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
        return await partition.offset_of_max_timestamp()
    if timestamp >= 0:
        return await partition.offset_for_timestamp(timestamp)
    return None
