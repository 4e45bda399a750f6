"""OffsetFetch (key 9): a group's committed offsets; -1 where nothing is committed.

v1-7 ask for one group (v2+ may ask for all its partitions with null topics,
and add a top-level error); v8+ batch several groups (KIP-709). require_stable
(v7+) answers UNSTABLE_OFFSET_COMMIT for partitions whose offsets an open
transaction is about to commit (TxnOffsetCommit), so the client retries.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.groups.coordinator import GroupCoordinator, valid_group_id
from kshim.protocol.errors import ErrorCode
from kshim.storage.committed_offsets import CommittedOffset
from kshim.storage.interface import TopicPartition

FIRST_BATCHED_VERSION = 8
NOTHING_COMMITTED = CommittedOffset(offset=-1, leader_epoch=-1, metadata="", commit_timestamp=-1)


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    coordinator = context.broker.groups
    if context.version >= FIRST_BATCHED_VERSION:
        groups = [
            _mark_unstable(context, _fetch(coordinator, group.group_id, group.topics), request)
            for group in request.groups
        ]
        return {"throttle_time": 0, "groups": groups}
    answer = _mark_unstable(context, _fetch(coordinator, request.group_id, request.topics), request)
    return {"throttle_time": 0, "topics": answer["topics"], "error_code": answer["error_code"]}


def _fetch(coordinator: GroupCoordinator, group_id: str, topics: Any) -> dict[str, Any]:
    if not valid_group_id(group_id):
        return {"group_id": group_id, "error_code": ErrorCode.invalid_group_id, "topics": []}
    committed = coordinator.offsets.committed(group_id)
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for topic_partition in sorted(committed):
            wanted.setdefault(topic_partition.topic, []).append(topic_partition.partition)
    else:
        wanted = {topic.name: list(topic.partition_indexes) for topic in topics}
    answer = [
        {
            "name": topic,
            "partitions": [
                _partition(index, committed.get(TopicPartition(topic, index), NOTHING_COMMITTED))
                for index in indexes
            ],
        }
        for topic, indexes in wanted.items()
    ]
    return {"group_id": group_id, "error_code": ErrorCode.none, "topics": answer}


def _mark_unstable(context: RequestContext, answer: dict[str, Any], request: Any) -> dict[str, Any]:
    if not getattr(request, "require_stable", False):
        return answer
    pending = context.broker.transactions.pending_offsets(answer["group_id"])
    for topic in answer["topics"]:
        for partition in topic["partitions"]:
            if TopicPartition(topic["name"], partition["partition_index"]) in pending:
                partition["error_code"] = ErrorCode.unstable_offset_commit
    return answer


def _partition(index: int, committed: CommittedOffset) -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": committed.offset,
        "committed_leader_epoch": committed.leader_epoch,
        "metadata": committed.metadata,
        "error_code": ErrorCode.none,
    }
