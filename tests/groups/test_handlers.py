"""Every advertised version of the group APIs, end to end through decode, handler and encode.

The whole life of a group (join, sync, heartbeat, commit, fetch, list, describe,
leave, delete) runs at each "level" of versions, from the oldest to the newest
kshim advertises, so each version's fields are exercised at least once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.errors import ErrorCode
from tests.groups.support import assignment, subscription
from tests.groups.wire import call

OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 11, 12, 13, 14
DESCRIBE, LIST, DELETE, OFFSET_DELETE = 15, 16, 42, 47
GROUP_APIS = (OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE)
INT32_MIN = -(2**31)
TOPIC = "orders"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = BrokerConfig.load(
        [{"log.dirs": str(tmp_path / "data"), "group.initial.rebalance.delay.ms": "0"}]
    )
    broker = Broker(config)
    await broker.start()
    await broker.topics.create(TOPIC, 2, {})
    yield broker
    await broker.close()


def version_at(api_key: int, level: int) -> int:
    low, high = ADVERTISED[api_key]
    return max(low, min(level, high))


def test_group_apis_are_advertised_as_planned() -> None:
    assert {key: ADVERTISED[key] for key in (*GROUP_APIS, OFFSET_DELETE)} == {
        OFFSET_COMMIT: (2, 9),
        OFFSET_FETCH: (1, 9),
        JOIN: (0, 9),
        HEARTBEAT: (0, 4),
        LEAVE: (0, 5),
        SYNC: (0, 5),
        DESCRIBE: (0, 5),
        LIST: (0, 5),
        DELETE: (0, 2),
        OFFSET_DELETE: (0, 0),
    }


async def join(broker: Broker, group: str, level: int) -> tuple[str, int]:
    version = version_at(JOIN, level)
    fields: dict[str, Any] = {
        "group_id": group,
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(TOPIC)}],
    }
    response = await call(broker, JOIN, version, fields)
    if version >= 4:
        assert response.error_code == ErrorCode.member_id_required
        fields["member_id"] = response.member_id
        response = await call(broker, JOIN, version, fields)
    assert response.error_code == ErrorCode.none
    assert response.generation_id == 1
    assert response.leader == response.member_id
    assert [(m.member_id, m.metadata) for m in response.members] == [
        (response.member_id, subscription(TOPIC))
    ]
    assert response.protocol_name == "range"
    return response.member_id, response.generation_id


async def commit_and_fetch(broker: Broker, group: str, member: str, level: int) -> None:
    partitions = [
        {
            "partition_index": 0,
            "committed_offset": 5,
            "committed_leader_epoch": 2,
            "committed_metadata": "meta",
        }
    ]
    committed = await call(
        broker,
        OFFSET_COMMIT,
        version_at(OFFSET_COMMIT, level),
        {
            "group_id": group,
            "generation_id_or_member_epoch": 1,
            "member_id": member,
            "retention_time": -1,
            "topics": [
                {"name": TOPIC, "partitions": partitions},
                {"name": "missing", "partitions": partitions},
            ],
        },
    )
    errors = [p.error_code for t in committed.topics for p in t.partitions]
    assert errors == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    fetched = await fetch(broker, group, level)
    assert fetched == {0: (5, "meta"), 1: (-1, "")}


async def fetch(broker: Broker, group: str, level: int) -> dict[int, tuple[int, str | None]]:
    version = version_at(OFFSET_FETCH, level)
    topics = [{"name": TOPIC, "partition_indexes": [0, 1]}]
    if version >= 8:
        request: dict[str, Any] = {"groups": [{"group_id": group, "topics": topics}]}
        response = await call(broker, OFFSET_FETCH, version, request)
        assert [g.group_id for g in response.groups] == [group]
        answer = response.groups[0]
    else:
        answer = await call(broker, OFFSET_FETCH, version, {"group_id": group, "topics": topics})
    return {
        p.partition_index: (p.committed_offset, p.metadata)
        for t in answer.topics
        for p in t.partitions
    }


async def list_and_describe(broker: Broker, group: str, member: str, level: int) -> None:
    listed = await call(broker, LIST, version_at(LIST, level), {})
    assert [(g.group_id, g.protocol_type) for g in listed.groups] == [(group, "consumer")]
    if version_at(LIST, level) >= 4:
        assert listed.groups[0].group_state == "Stable"
        filtered = await call(broker, LIST, version_at(LIST, level), {"states_filter": ["empty"]})
        assert filtered.groups == ()
    described = await call(
        broker,
        DESCRIBE,
        version_at(DESCRIBE, level),
        {"groups": [group], "include_authorized_operations": True},
    )
    (description,) = described.groups
    assert (description.group_state, description.protocol_data) == ("Stable", "range")
    (described_member,) = description.members
    assert described_member.member_id == member
    assert described_member.client_id == "wire-test"
    assert described_member.member_assignment == assignment(TOPIC, [0, 1])
    if version_at(DESCRIBE, level) >= 3:
        assert description.authorized_operations == INT32_MIN


async def leave(broker: Broker, group: str, member: str, level: int) -> None:
    version = version_at(LEAVE, level)
    if version >= 3:
        response = await call(
            broker,
            LEAVE,
            version,
            {
                "group_id": group,
                "members": [
                    {"member_id": member, "group_instance_id": None},
                    {"member_id": "ghost", "group_instance_id": None},
                ],
            },
        )
        assert [m.error_code for m in response.members] == [
            ErrorCode.none,
            ErrorCode.unknown_member_id,
        ]
    else:
        response = await call(broker, LEAVE, version, {"group_id": group, "member_id": member})
    assert response.error_code == ErrorCode.none


@pytest.mark.parametrize("level", range(10))
async def test_group_life_at_every_version(broker: Broker, level: int) -> None:
    group = f"group-{level}"
    member, generation = await join(broker, group, level)
    synced = await call(
        broker,
        SYNC,
        version_at(SYNC, level),
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": assignment(TOPIC, [0, 1])}],
        },
    )
    assert synced.error_code == ErrorCode.none
    assert synced.assignment == assignment(TOPIC, [0, 1])
    beat = await call(
        broker,
        HEARTBEAT,
        version_at(HEARTBEAT, level),
        {"group_id": group, "generation_id": generation, "member_id": member},
    )
    assert beat.error_code == ErrorCode.none
    stale = await call(
        broker,
        HEARTBEAT,
        version_at(HEARTBEAT, level),
        {"group_id": group, "generation_id": 0, "member_id": member},
    )
    assert stale.error_code == ErrorCode.illegal_generation
    await commit_and_fetch(broker, group, member, level)
    await list_and_describe(broker, group, member, level)
    await leave(broker, group, member, level)
    deleted = await call(broker, DELETE, version_at(DELETE, level), {"groups_names": [group]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, ErrorCode.none)]
    assert await fetch(broker, group, level) == {0: (-1, ""), 1: (-1, "")}


async def test_offset_fetch_with_null_topics_returns_everything_committed(broker: Broker) -> None:
    await call(
        broker,
        OFFSET_COMMIT,
        3,
        {
            "group_id": "standalone",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": -1,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 1, "committed_offset": 9, "committed_metadata": None}
                    ],
                }
            ],
        },
    )
    response = await call(broker, OFFSET_FETCH, 7, {"group_id": "standalone", "topics": None})
    assert [
        (t.name, p.partition_index, p.committed_offset, p.metadata)
        for t in response.topics
        for p in t.partitions
    ] == [(TOPIC, 1, 9, "")]


async def test_offset_delete(broker: Broker) -> None:
    await call(
        broker,
        OFFSET_COMMIT,
        9,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1}
                    ],
                }
            ],
        },
    )
    request = {
        "group_id": "g",
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}, {"partition_index": 7}]}],
    }
    response = await call(broker, OFFSET_DELETE, 0, request)
    assert response.error_code == ErrorCode.none
    assert [p.error_code for p in response.topics[0].partitions] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert (await call(broker, OFFSET_DELETE, 0, request)).error_code == (
        ErrorCode.group_id_not_found
    )


async def test_join_v0_uses_the_session_timeout_as_rebalance_timeout(broker: Broker) -> None:
    response = await call(
        broker,
        JOIN,
        0,
        {
            "group_id": "old",
            "session_timeout": 7000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert response.error_code == ErrorCode.none
    member = broker.groups.groups["old"].members[response.member_id]
    assert member.rebalance_timeout_ms == member.session_timeout_ms == 7000
