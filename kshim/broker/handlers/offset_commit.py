"""OffsetCommit (key 8): store a group's consumed positions, durably, before answering.

Fencing (generation, member, group.instance.id) applies to the whole request;
then each partition is checked on its own (unknown partition, metadata over
``offset.metadata.max.bytes``). All accepted partitions are written in one
fsynced LMDB transaction. v2-4 carry retention_time, which (when not -1) sets
the offsets' expiry as in Kafka; v6+ carry the leader epoch.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.groups.admin import check_commit
from kshim.protocol.codec import milliseconds
from kshim.protocol.errors import ErrorCode
from kshim.storage.committed_offsets import NO_EXPIRY, CommittedOffset
from kshim.storage.interface import TopicPartition

NO_LEADER_EPOCH = -1


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    fenced = check_commit(
        broker.groups,
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    now = broker.clock()
    retention_ms = milliseconds(getattr(request, "retention_time", None))
    expire_timestamp = now + retention_ms if retention_ms >= 0 else NO_EXPIRY
    accepted: dict[TopicPartition, CommittedOffset] = {}
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            topic_partition = TopicPartition(topic.name, partition.partition_index)
            error = fenced
            if error == ErrorCode.none:
                error = _check(broker, topic_partition, partition)
            if error == ErrorCode.none:
                accepted[topic_partition] = _committed(partition, now, expire_timestamp)
            partitions.append({"partition_index": partition.partition_index, "error_code": error})
        topics.append({"name": topic.name, "partitions": partitions})
    await broker.groups.offsets.commit(request.group_id, accepted)
    return {"throttle_time": 0, "topics": topics}


def _committed(partition: Any, now: int, expire_timestamp: int) -> CommittedOffset:
    return CommittedOffset(
        offset=partition.committed_offset,
        leader_epoch=getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH),
        metadata=partition.committed_metadata or "",
        commit_timestamp=now,
        expire_timestamp=expire_timestamp,
    )


def _check(broker: Broker, topic_partition: TopicPartition, partition: Any) -> ErrorCode:
    if broker.partition_log(topic_partition) is None:
        return ErrorCode.unknown_topic_or_partition
    metadata = partition.committed_metadata or ""
    if len(metadata.encode("utf-8")) > broker.groups.settings.max_metadata_bytes:
        return ErrorCode.offset_metadata_too_large
    return ErrorCode.none
