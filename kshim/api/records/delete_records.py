"""DeleteRecords (key 21): move a partition's log start offset forward, durably.

A topic with a full-data view keeps what its view has not applied yet: the view
first applies up to the target, then the log start stops at the view's applied
position (below an open transaction; the returned low watermark says where it
got). Views themselves are read-only (the topic resolver refuses them). A refused
partition has no low watermark (-1), as in Kafka's ReplicaManager.deleteRecordsOnLocalLog.
"""

from __future__ import annotations

from typing import Protocol

from kshim.api.context import RequestContext
from kshim.api.services import WithResolver
from kshim.broker.retention import LogStartHost, delete_records_before
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kshim.storage.interface import TopicPartition

TO_HIGH_WATERMARK = -1
NO_LOW_WATERMARK = -1


class DeleteRecordsServices(WithResolver, LogStartHost, Protocol):
    """DeleteRecords': the partitions behind the names, and what moving a log start
    needs (kshim/broker/retention.py)."""


async def handle(
    request: DeleteRecordsRequest, context: RequestContext[DeleteRecordsServices]
) -> DeleteRecordsResponse:
    topics = []
    for topic in request.topics:
        partitions = [
            await _delete(
                context.broker,
                TopicPartition(topic.name, partition.partition_index),
                partition.offset,
            )
            for partition in topic.partitions
        ]
        topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


async def _delete(
    broker: DeleteRecordsServices, topic_partition: TopicPartition, offset: int
) -> DeleteRecordsPartitionResult:
    index = topic_partition.partition
    try:
        partition = broker.resolver.deletable_partition(topic_partition)
    except TopicError as error:
        return _result(index, ErrorCode(error.code))
    if partition is None:
        return _result(index, ErrorCode.unknown_topic_or_partition)
    log = partition.log
    target = log.high_watermark if offset == TO_HIGH_WATERMARK else offset
    if target < 0 or target > log.high_watermark:
        return _result(index, ErrorCode.offset_out_of_range)
    await delete_records_before(broker, partition, target)
    return _result(index, ErrorCode.none, log.log_start_offset)


def _result(
    partition_index: int, error: ErrorCode, low_watermark: int = NO_LOW_WATERMARK
) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(
        partition_index=partition_index, low_watermark=low_watermark, error_code=error
    )
