"""Offsets of a full-data view's partitions: a group consuming ``T.full`` commits, fetches
and deletes them like a topic's, and retention keeps them while the view exists.

The handlers are called directly with typed requests, and their typed answers checked.
"""

from __future__ import annotations

from kshim.api.admin import delete_topics
from kshim.api.context import RequestContext
from kshim.api.groups import offset_commit, offset_delete, offset_fetch
from kshim.broker.broker import Broker
from kshim.broker.groups.maintenance import expire_broker_offsets_once
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.errors import ErrorCode
from kshim.protocol.headers import RequestHeader
from kshim.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from kshim.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kshim.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kshim.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.committed_offsets import CommittedOffset
from tests.groups.support import TOPIC

OFFSET_COMMIT, OFFSET_FETCH, DELETE_TOPICS, OFFSET_DELETE = 8, 9, 20, 47
VIEW = TOPIC + ".full"
NO_VIEW = "plain"  # a topic whose view is off: "plain.full" names nothing
GROUP = "view-readers"


def context(broker: Broker, api_key: int) -> RequestContext:
    """A request at the newest version kshim serves."""
    return RequestContext(RequestHeader(api_key, ADVERTISED[api_key][1], 1, "direct"), broker)


async def commit(broker: Broker, offsets: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    """Commits offset 10 + partition for each topic's partitions; returns each one's error."""
    request = OffsetCommitRequest(
        group_id=GROUP,
        topics=[
            OffsetCommitRequestTopic(
                name=name,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=index, committed_offset=10 + index)
                    for index in indexes
                ],
            )
            for name, indexes in offsets.items()
        ],
    )
    response = await offset_commit.handle(request, context(broker, OFFSET_COMMIT))
    return {
        (topic.name, partition.partition_index): partition.error_code
        for topic in response.topics
        for partition in topic.partitions
    }


async def fetch(broker: Broker, name: str, indexes: list[int]) -> dict[int, int]:
    topics = [OffsetFetchRequestTopics(name=name, partition_indexes=indexes)]
    request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=GROUP, topics=topics)])
    response = await offset_fetch.handle(request, context(broker, OFFSET_FETCH))
    ((topic,),) = [group.topics for group in response.groups]
    assert {p.error_code for p in topic.partitions} == {ErrorCode.none}
    return {p.partition_index: p.committed_offset for p in topic.partitions}


async def test_a_view_partition_takes_offsets_like_its_topics(broker: Broker) -> None:
    await broker.topics.create(NO_VIEW, 1, {"kshim.full.view": "false"})
    errors = await commit(broker, {VIEW: [0, 1, 2], "missing.full": [0], NO_VIEW + ".full": [0]})
    assert errors == {
        (VIEW, 0): ErrorCode.none,
        (VIEW, 1): ErrorCode.none,
        (VIEW, 2): ErrorCode.unknown_topic_or_partition,  # the topic has two partitions
        ("missing.full", 0): ErrorCode.unknown_topic_or_partition,
        (NO_VIEW + ".full", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert await fetch(broker, VIEW, [0, 1]) == {0: 10, 1: 11}
    assert await fetch(broker, TOPIC, [0, 1]) == {0: -1, 1: -1}  # the topic's are its own

    partitions = [OffsetDeleteRequestPartition(partition_index=index) for index in (0, 5)]
    request = OffsetDeleteRequest(
        group_id=GROUP, topics=[OffsetDeleteRequestTopic(name=VIEW, partitions=partitions)]
    )
    response = await offset_delete.handle(request, context(broker, OFFSET_DELETE))
    assert response.error_code == ErrorCode.none
    assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == [
        (0, ErrorCode.none),
        (5, ErrorCode.unknown_topic_or_partition),
    ]
    assert await fetch(broker, VIEW, [0, 1]) == {0: -1, 1: 11}


async def test_retention_keeps_view_offsets_while_the_view_exists(broker: Broker) -> None:
    await commit(broker, {VIEW: [0], TOPIC: [0]})
    gone = TopicPartition("gone", 0)  # offsets of a topic deleted since
    recent = CommittedOffset(3, -1, "", broker.clock())
    await broker.groups.offsets.commit(GROUP, {gone: recent})
    assert await expire_broker_offsets_once(broker) == 1  # only the topic that is gone
    assert set(broker.groups.offsets.committed(GROUP)) == {
        TopicPartition(VIEW, 0),
        TopicPartition(TOPIC, 0),
    }
    await broker.topics.set_configs(TOPIC, {"kshim.full.view": "false"})  # the view is gone
    assert await expire_broker_offsets_once(broker) == 1
    assert set(broker.groups.offsets.committed(GROUP)) == {TopicPartition(TOPIC, 0)}


async def test_deleting_a_topic_drops_its_views_offsets(broker: Broker) -> None:
    """A topic recreated under the name must not be read from its predecessor's positions,
    on its view no more than on itself (Kafka drops a deleted topic's offsets at once)."""
    await commit(broker, {VIEW: [0], TOPIC: [0]})
    request = DeleteTopicsRequest(topics=[DeleteTopicState(name=TOPIC)], timeout_ms=1000)
    [result] = (await delete_topics.handle(request, context(broker, DELETE_TOPICS))).responses
    assert result.error_code == ErrorCode.none
    await broker.topics.create(TOPIC, 2, {})
    assert await fetch(broker, VIEW, [0]) == {0: -1}
    assert await fetch(broker, TOPIC, [0]) == {0: -1}
