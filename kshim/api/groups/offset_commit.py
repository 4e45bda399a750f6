"""OffsetCommit (key 8): store a group's consumed positions, durably, before answering.

As Kafka's KafkaApis, the handler answers UNKNOWN_TOPIC_OR_PARTITION for a
partition no consumer can read and hands the others to the group coordinator
(``groups/offset_commits.py``: fencing, metadata size, one fsynced write). Any
partition a consumer can fetch takes offsets: a topic's, or a full-data view's.
v2-4 carry retention_time (-1 in other versions); v6+ the leader epoch (-1 before).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.groups.services import GroupsAndTopics
from kshim.broker.groups.offset_commits import CommitRequest, PartitionCommit, commit_offsets
from kshim.broker.topic_resolver import TopicResolver
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kshim.storage.interface import TopicPartition


async def handle(
    request: OffsetCommitRequest, context: RequestContext[GroupsAndTopics]
) -> OffsetCommitResponse:
    commit = CommitRequest(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        retention_ms=request.retention_time_ms,
        offsets=_readable_offsets(request, context.broker.resolver),
    )
    errors = await commit_offsets(context.broker.groups, commit)
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=partition.partition_index,
                        error_code=errors.get(
                            TopicPartition(topic.name, partition.partition_index),
                            ErrorCode.unknown_topic_or_partition,
                        ),
                    )
                    for partition in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


def _readable_offsets(
    request: OffsetCommitRequest, resolver: TopicResolver
) -> dict[TopicPartition, PartitionCommit]:
    """The offsets to commit of the partitions that exist."""
    offsets = {}
    for topic in request.topics:
        for partition in topic.partitions:
            topic_partition = TopicPartition(topic.name, partition.partition_index)
            if resolver.readable_partition(topic_partition) is not None:
                offsets[topic_partition] = PartitionCommit(
                    offset=partition.committed_offset,
                    leader_epoch=partition.committed_leader_epoch,
                    metadata=partition.committed_metadata or "",
                )
    return offsets
