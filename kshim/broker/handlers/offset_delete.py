"""OffsetDelete (key 47): forget a group's offsets of topics it does not consume (KIP-496).

Partitions of topics a live member subscribes to get GROUP_SUBSCRIBED_TO_TOPIC;
a group with members whose subscriptions cannot be read gets NON_EMPTY_GROUP.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.groups.admin import delete_offsets
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    requested = [
        TopicPartition(topic.name, partition.partition_index)
        for topic in request.topics
        for partition in topic.partitions
    ]
    known = [tp for tp in requested if broker.partition_log(tp) is not None]
    group_error, errors = await delete_offsets(broker.groups, request.group_id, known)
    if group_error != ErrorCode.none:
        return {"error_code": group_error, "throttle_time": 0, "topics": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic_partition in requested:
        error = errors.get(topic_partition, ErrorCode.unknown_topic_or_partition)
        topics.setdefault(topic_partition.topic, []).append(
            {"partition_index": topic_partition.partition, "error_code": error}
        )
    return {
        "error_code": ErrorCode.none,
        "throttle_time": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }
