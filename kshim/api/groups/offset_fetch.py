"""OffsetFetch (key 9): a group's committed offsets; -1 where nothing is committed.

v1-7 ask for one group (v2+ may ask for all its partitions with null topics,
and add a top-level error); v8+ batch several groups (KIP-709), with their own
nested classes. require_stable (v7+) answers UNSTABLE_OFFSET_COMMIT for
partitions whose offsets an open transaction is about to commit
(TxnOffsetCommit), so the client retries; the group coordinator
(``groups/offset_commits.py``) answers the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from kshim.api.context import RequestContext
from kshim.api.groups.services import GroupsAndTransactions
from kshim.broker.groups.offset_commits import FetchedOffset, fetch_offsets
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from kshim.storage.interface import TopicPartition

FIRST_BATCHED_VERSION = 8  # KIP-709

RequestTopics = Sequence[OffsetFetchRequestTopic | OffsetFetchRequestTopics] | None
Partition = TypeVar("Partition", OffsetFetchResponsePartition, OffsetFetchResponsePartitions)


async def handle(
    request: OffsetFetchRequest, context: RequestContext[GroupsAndTransactions]
) -> OffsetFetchResponse:
    if context.version >= FIRST_BATCHED_VERSION:
        groups = []
        for group in request.groups:
            error, fetched = _fetch(context, request, group.group_id, group.topics)
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=group.group_id, topics=_batched_topics(fetched), error_code=error
                )
            )
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups, topics=[])
    error, fetched = _fetch(context, request, request.group_id, request.topics)
    return OffsetFetchResponse(
        throttle_time_ms=0, groups=[], topics=_topics(fetched), error_code=error
    )


def _fetch(
    context: RequestContext[GroupsAndTransactions],
    request: OffsetFetchRequest,
    group_id: str,
    topics: RequestTopics,
) -> tuple[ErrorCode, list[FetchedOffset]]:
    wanted = None
    if topics is not None:
        wanted = [
            TopicPartition(topic.name, index)
            for topic in topics
            for index in topic.partition_indexes
        ]
    unstable: set[TopicPartition] = set()
    if request.require_stable:
        unstable = context.broker.transactions.pending_offsets(group_id)
    return fetch_offsets(context.broker.groups, group_id, wanted, unstable)


def _by_topic(fetched: list[FetchedOffset]) -> dict[str, list[FetchedOffset]]:
    """The fetched offsets by topic, each topic where it first appears."""
    topics: dict[str, list[FetchedOffset]] = {}
    for offset in fetched:
        topics.setdefault(offset.topic_partition.topic, []).append(offset)
    return topics


def _topics(fetched: list[FetchedOffset]) -> list[OffsetFetchResponseTopic]:
    """v1-7's topics."""
    return [
        OffsetFetchResponseTopic(
            name=name, partitions=_partitions(offsets, OffsetFetchResponsePartition)
        )
        for name, offsets in _by_topic(fetched).items()
    ]


def _batched_topics(fetched: list[FetchedOffset]) -> list[OffsetFetchResponseTopics]:
    """v8+'s topics of one group: the same fields in classes of their own."""
    return [
        OffsetFetchResponseTopics(
            name=name, partitions=_partitions(offsets, OffsetFetchResponsePartitions)
        )
        for name, offsets in _by_topic(fetched).items()
    ]


def _partitions(offsets: list[FetchedOffset], partition_class: type[Partition]) -> list[Partition]:
    """One topic's offsets as v1-7's or v8+'s partitions, which hold the same fields."""
    return [
        partition_class(
            partition_index=offset.topic_partition.partition,
            committed_offset=offset.committed.offset,
            committed_leader_epoch=offset.committed.leader_epoch,
            metadata=offset.committed.metadata,
            error_code=offset.error,
        )
        for offset in offsets
    ]
