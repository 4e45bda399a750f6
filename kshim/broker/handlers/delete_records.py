"""DeleteRecords (key 21): move a partition's log start offset forward, durably.

A topic with a full-data view keeps what its view has not applied yet: the view
first applies up to the target, then the log start stops at the view's applied
position (below an open transaction; the returned low watermark says where it
got). Views themselves are read-only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.full_view.applier import catch_up
from kshim.broker.full_view.naming import has_view, source_of
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition

TO_HIGH_WATERMARK = -1


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
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
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def _delete(broker: Broker, topic_partition: TopicPartition, offset: int) -> dict[str, Any]:
    answer: dict[str, Any] = {"partition_index": topic_partition.partition, "low_watermark": -1}
    log = broker.partition_log(topic_partition)
    if log is None:
        answer["error_code"] = ErrorCode.unknown_topic_or_partition
        if source_of(broker.topics.topics, topic_partition.topic) is not None:
            answer["error_code"] = ErrorCode.policy_violation  # a view is read-only
        return answer
    target = log.high_watermark if offset == TO_HIGH_WATERMARK else offset
    if target < 0 or target > log.high_watermark:
        answer.update(error_code=ErrorCode.offset_out_of_range, low_watermark=log.log_start_offset)
        return answer
    topic = broker.topic(topic_partition.topic)
    if topic is not None and has_view(topic):
        # Apply what is stable first, so only an open transaction holds the log start back.
        target = min(target, await catch_up(broker, topic_partition, until=target))
    if target > log.log_start_offset:
        await asyncio.to_thread(broker.metadata.set_log_start_offset, topic_partition, target)
        log.advance_log_start_offset(target)
        broker.transactions.forget_below(topic_partition, target)
    answer.update(error_code=ErrorCode.none, low_watermark=log.log_start_offset)
    return answer
