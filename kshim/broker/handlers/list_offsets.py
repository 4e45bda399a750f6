"""ListOffsets (key 2): earliest, latest, max timestamp and offsets by timestamp.

Latest is the high watermark (the last stable offset under read_committed),
so it always agrees with what Fetch can return: Spark relies on that.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.full_view.naming import source_of
from kshim.broker.full_view.reader import offset_for_timestamp as view_offset_for_timestamp
from kshim.broker.full_view.reader import view_offsets
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition
from kshim.storage.partition_log import PartitionLog
from kshim.storage.timestamp_lookup import offset_for_timestamp, offset_of_max_timestamp

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
READ_COMMITTED = 1
NOT_FOUND = {"timestamp": -1, "offset": -1}


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            log = broker.partition_log(TopicPartition(topic.name, partition.partition_index))
            answer: dict[str, Any] = {
                "partition_index": partition.partition_index,
                "leader_epoch": 0,
            }
            if log is None:
                answer.update(await _lookup_view(broker, topic.name, partition))
            else:
                latest = log.high_watermark
                if getattr(request, "isolation_level", 0) == READ_COMMITTED:
                    transactions = broker.transactions.partition(log.topic_partition)
                    latest = transactions.last_stable_offset(latest)
                answer.update(
                    error_code=ErrorCode.none, **await _lookup(log, partition.timestamp, latest)
                )
            partitions.append(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def _lookup_view(broker: Broker, name: str, partition: Any) -> dict[str, Any]:
    """ListOffsets on ``T.full``: earliest is its first live record, latest its high
    watermark under both isolation levels (it holds committed data only)."""
    source = source_of(broker.topics.topics, name)
    if source is None or not 0 <= partition.partition_index < len(source.logs):
        return {"error_code": ErrorCode.unknown_topic_or_partition, **NOT_FOUND}
    source_partition = TopicPartition(source.record.name, partition.partition_index)
    offsets = await view_offsets(broker, source_partition)
    timestamp = partition.timestamp
    if timestamp == LATEST:
        return {"error_code": ErrorCode.none, "timestamp": -1, "offset": offsets.high_watermark}
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        found = {"timestamp": -1, "offset": offsets.log_start_offset}
        return {"error_code": ErrorCode.none, **found}
    if timestamp != MAX_TIMESTAMP and timestamp < 0:
        return {"error_code": ErrorCode.none, **NOT_FOUND}
    wanted = None if timestamp == MAX_TIMESTAMP else timestamp
    hit = await view_offset_for_timestamp(broker, source_partition, wanted)
    if hit is None:
        return {"error_code": ErrorCode.none, **NOT_FOUND}
    return {"error_code": ErrorCode.none, "timestamp": hit[1], "offset": hit[0]}


async def _lookup(log: PartitionLog, timestamp: int, latest: int) -> dict[str, int]:
    """``latest`` is the high watermark, or the last stable offset under read_committed."""
    if timestamp == LATEST:
        return {"timestamp": -1, "offset": latest}
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return {"timestamp": -1, "offset": log.log_start_offset}
    if timestamp == MAX_TIMESTAMP:
        found = await offset_of_max_timestamp(log)
    elif timestamp >= 0:
        found = await offset_for_timestamp(log, timestamp)
    else:
        return NOT_FOUND
    if found is None:
        return NOT_FOUND
    offset, record_timestamp = found
    return {"timestamp": record_timestamp, "offset": offset}
