"""OffsetDelete (key 47): forget a group's offsets of topics it does not consume (KIP-496).

As Kafka's KafkaApis, partitions that do not exist (neither a topic's nor a
full-data view's) get UNKNOWN_TOPIC_OR_PARTITION here; the group coordinator
(``groups/offset_commits.py``) answers the others, or one error for the group.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.groups.services import GroupsAndTopics
from kshim.broker.groups.offset_commits import delete_offsets
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kshim.storage.interface import TopicPartition


async def handle(
    request: OffsetDeleteRequest, context: RequestContext[GroupsAndTopics]
) -> OffsetDeleteResponse:
    resolver = context.broker.resolver
    requested = [
        TopicPartition(topic.name, partition.partition_index)
        for topic in request.topics
        for partition in topic.partitions
    ]
    readable = [tp for tp in requested if resolver.readable_partition(tp) is not None]
    group_error, errors = await delete_offsets(context.broker.groups, request.group_id, readable)
    if group_error != ErrorCode.none:
        return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
    topics: dict[str, list[OffsetDeleteResponsePartition]] = {}
    for topic_partition in requested:
        topics.setdefault(topic_partition.topic, []).append(
            OffsetDeleteResponsePartition(
                partition_index=topic_partition.partition,
                error_code=errors.get(topic_partition, ErrorCode.unknown_topic_or_partition),
            )
        )
    return OffsetDeleteResponse(
        error_code=ErrorCode.none,
        throttle_time_ms=0,
        topics=[
            OffsetDeleteResponseTopic(name=name, partitions=partitions)
            for name, partitions in topics.items()
        ],
    )
