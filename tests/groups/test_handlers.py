"""Every advertised version of the group APIs, end to end through decode, handler and encode.

The whole life of a group (join, sync, heartbeat, commit, fetch, list, describe,
leave, delete) runs at each "level" of versions, from the oldest to the newest
kshim advertises, so each version's fields are exercised at least once. Requests
are the handlers' typed requests, encoded for the version as a client of that
version would send them (fields it lacks left out); answers are decoded with
kio's class for the version, so what each version carries is checked as bytes.
"""

from __future__ import annotations

from typing import Any

import pytest

from kshim.broker.broker import Broker
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.delete_groups import DeleteGroupsRequest
from kshim.protocol.messages.describe_groups import DescribeGroupsRequest
from kshim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kshim.protocol.messages.heartbeat import HeartbeatRequest
from kshim.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kshim.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kshim.protocol.messages.list_groups import ListGroupsRequest
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
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kshim.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.groups.support import TOPIC, assignment, subscription
from tests.groups.wire import send

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE, SYNC, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 13, 14, 15, 16, 42, 47
GROUP_APIS = (OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE)
# KIP-430's bits, one at each AclOperation code: READ 3, DELETE 6, DESCRIBE 8,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11 (Kafka 4.0's operations on a group).
EVERY_GROUP_OPERATION = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


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


def join_request(group: str, member_id: str = "", session_ms: int = 10_000) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=subscription(TOPIC))],
    )


async def join(broker: Broker, group: str, level: int) -> tuple[str, int]:
    version = version_at(JOIN, level)
    response = await send(broker, JOIN, version, join_request(group))
    if version >= 4:
        assert response.error_code == ErrorCode.member_id_required
        response = await send(broker, JOIN, version, join_request(group, response.member_id))
    assert response.error_code == ErrorCode.none
    assert response.generation_id == 1
    assert response.leader == response.member_id
    assert [(m.member_id, m.metadata) for m in response.members] == [
        (response.member_id, subscription(TOPIC))
    ]
    assert response.protocol_name == "range"
    return response.member_id, response.generation_id


def commit_request(group: str, member: str, generation: int, *topics: str) -> OffsetCommitRequest:
    partition = OffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=2, committed_metadata="meta"
    )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        topics=[OffsetCommitRequestTopic(name=name, partitions=[partition]) for name in topics],
    )


async def commit_and_fetch(broker: Broker, group: str, member: str, level: int) -> None:
    request = commit_request(group, member, 1, TOPIC, "missing")
    committed = await send(broker, OFFSET_COMMIT, version_at(OFFSET_COMMIT, level), request)
    errors = [p.error_code for t in committed.topics for p in t.partitions]
    assert errors == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    fetched = await fetch(broker, group, level)
    assert fetched == {0: (5, "meta"), 1: (-1, "")}


async def fetch(broker: Broker, group: str, level: int) -> dict[int, tuple[int, str | None]]:
    version = version_at(OFFSET_FETCH, level)
    if version >= 8:
        topics = [OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])]
        groups = [OffsetFetchRequestGroup(group_id=group, topics=topics)]
        response = await send(broker, OFFSET_FETCH, version, OffsetFetchRequest(groups=groups))
        assert [g.group_id for g in response.groups] == [group]
        answer = response.groups[0]
    else:
        request = OffsetFetchRequest(
            group_id=group, topics=[OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]
        )
        answer = await send(broker, OFFSET_FETCH, version, request)
    return {
        p.partition_index: (p.committed_offset, p.metadata)
        for t in answer.topics
        for p in t.partitions
    }


async def list_and_describe(broker: Broker, group: str, member: str, level: int) -> None:
    listed = await send(broker, LIST, version_at(LIST, level), ListGroupsRequest())
    assert [(g.group_id, g.protocol_type) for g in listed.groups] == [(group, "consumer")]
    if version_at(LIST, level) >= 4:
        assert listed.groups[0].group_state == "Stable"
        empty_only = ListGroupsRequest(states_filter=["empty"])
        filtered = await send(broker, LIST, version_at(LIST, level), empty_only)
        assert filtered.groups == ()
    request = DescribeGroupsRequest(groups=[group], include_authorized_operations=True)
    described = await send(broker, DESCRIBE, version_at(DESCRIBE, level), request)
    (description,) = described.groups
    assert (description.group_state, description.protocol_data) == ("Stable", "range")
    (described_member,) = description.members
    assert described_member.member_id == member
    assert described_member.client_id == "wire-test"
    assert described_member.member_assignment == assignment(TOPIC, [0, 1])
    if version_at(DESCRIBE, level) >= 3:  # asked for, with no authoriser: all of them
        assert description.authorized_operations == EVERY_GROUP_OPERATION


async def leave(broker: Broker, group: str, member: str, level: int) -> None:
    version = version_at(LEAVE, level)
    if version >= 3:
        members = [MemberIdentity(member_id=member), MemberIdentity(member_id="ghost")]
        request = LeaveGroupRequest(group_id=group, members=members)
        response = await send(broker, LEAVE, version, request)
        assert [m.error_code for m in response.members] == [
            ErrorCode.none,
            ErrorCode.unknown_member_id,
        ]
    else:
        request = LeaveGroupRequest(group_id=group, member_id=member)
        response = await send(broker, LEAVE, version, request)
    assert response.error_code == ErrorCode.none


@pytest.mark.parametrize("level", range(10))
async def test_group_life_at_every_version(broker: Broker, level: int) -> None:
    group = f"group-{level}"
    member, generation = await join(broker, group, level)
    sync = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequestAssignment(member_id=member, assignment=assignment(TOPIC, [0, 1]))
        ],
    )
    synced = await send(broker, SYNC, version_at(SYNC, level), sync)
    assert synced.error_code == ErrorCode.none
    assert synced.assignment == assignment(TOPIC, [0, 1])
    beat = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member)
    assert (await send(broker, HEARTBEAT, version_at(HEARTBEAT, level), beat)).error_code == (
        ErrorCode.none
    )
    stale = HeartbeatRequest(group_id=group, generation_id=0, member_id=member)
    assert (await send(broker, HEARTBEAT, version_at(HEARTBEAT, level), stale)).error_code == (
        ErrorCode.illegal_generation
    )
    await commit_and_fetch(broker, group, member, level)
    await list_and_describe(broker, group, member, level)
    await leave(broker, group, member, level)
    delete = DeleteGroupsRequest(groups_names=[group])
    deleted = await send(broker, DELETE, version_at(DELETE, level), delete)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, ErrorCode.none)]
    assert await fetch(broker, group, level) == {0: (-1, ""), 1: (-1, "")}


async def test_offset_fetch_with_null_topics_returns_everything_committed(broker: Broker) -> None:
    request = commit_request("standalone", "", -1, TOPIC)
    request.topics[0].partitions[0] = OffsetCommitRequestPartition(
        partition_index=1, committed_offset=9, committed_metadata=None
    )
    await send(broker, OFFSET_COMMIT, 3, request)
    everything = OffsetFetchRequest(group_id="standalone", topics=None)
    response = await send(broker, OFFSET_FETCH, 7, everything)
    assert [
        (t.name, p.partition_index, p.committed_offset, p.metadata)
        for t in response.topics
        for p in t.partitions
    ] == [(TOPIC, 1, 9, "")]


async def test_offset_delete(broker: Broker) -> None:
    await send(broker, OFFSET_COMMIT, 9, commit_request("g", "", -1, TOPIC))
    partitions = [OffsetDeleteRequestPartition(partition_index=index) for index in (0, 7)]
    request = OffsetDeleteRequest(
        group_id="g", topics=[OffsetDeleteRequestTopic(name=TOPIC, partitions=partitions)]
    )
    response = await send(broker, OFFSET_DELETE, 0, request)
    assert response.error_code == ErrorCode.none
    assert [p.error_code for p in response.topics[0].partitions] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert (await send(broker, OFFSET_DELETE, 0, request)).error_code == (
        ErrorCode.group_id_not_found
    )


async def test_join_v0_uses_the_session_timeout_as_rebalance_timeout(broker: Broker) -> None:
    request = join_request("old", session_ms=7000)
    request.protocols = [JoinGroupRequestProtocol(name="range", metadata=b"")]
    response = await send(broker, JOIN, 0, request)
    assert response.error_code == ErrorCode.none
    member = broker.groups.groups["old"].members[response.member_id]
    assert member.rebalance_timeout_ms == member.session_timeout_ms == 7000


@pytest.mark.parametrize("version", [0, 3, 4, 6])
async def test_find_coordinator_names_this_broker(broker: Broker, version: int) -> None:
    host, port = broker.config.advertised_address()
    request = FindCoordinatorRequest(key="g", key_type=0, coordinator_keys=["g", "h"])
    response = await send(broker, FIND_COORDINATOR, version, request)
    found: list[Any] = list(response.coordinators) if version >= 4 else [response]
    assert [(f.error_code, f.node_id, f.host, f.port) for f in found] == [
        (ErrorCode.none, broker.config.node_id, host, port)
    ] * len(found)
    if version >= 4:
        assert [f.key for f in found] == ["g", "h"]


# Errors.INVALID_REQUEST's own message: Kafka's answer when the whole request fails.
MALFORMED = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)


@pytest.mark.parametrize(
    ("version", "key_type", "error", "message"),
    [
        (1, 7, ErrorCode.invalid_request, MALFORMED),
        (4, 7, ErrorCode.invalid_request, MALFORMED),
        (6, 7, ErrorCode.invalid_request, MALFORMED),
        # A share group's coordinator (KIP-932): refused with the whole request before v4,
        # per key with no message in v4-5, and not available in v6 (none in Kafka 3.9).
        (3, 2, ErrorCode.invalid_request, MALFORMED),
        (5, 2, ErrorCode.invalid_request, ""),
        (6, 2, ErrorCode.coordinator_not_available, ""),
    ],
)
async def test_find_coordinator_refuses_key_types_without_a_coordinator(
    broker: Broker, version: int, key_type: int, error: ErrorCode, message: str
) -> None:
    transaction = FindCoordinatorRequest(key="t", key_type=1, coordinator_keys=["t"])
    found = await send(broker, FIND_COORDINATOR, version, transaction)
    assert (found.coordinators[0] if version >= 4 else found).error_code == ErrorCode.none
    unknown = FindCoordinatorRequest(key="x", key_type=key_type, coordinator_keys=["x"])
    response = await send(broker, FIND_COORDINATOR, version, unknown)
    refused = response.coordinators[0] if version >= 4 else response
    assert (refused.error_code, refused.node_id, refused.host, refused.port) == (error, -1, "", -1)
    assert refused.error_message == message
