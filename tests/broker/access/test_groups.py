"""The consumer group APIs and FindCoordinator behind their access rules: a member needs
READ on its group, an admin DESCRIBE or DELETE; offsets need READ (commit, delete) or
DESCRIBE (fetch) on their topics."""

from __future__ import annotations

from typing import Any

from kshim.broker.broker import Broker
from kshim.protocol.acls import Operation, PatternType, Permission
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
from kshim.protocol.messages.sync_group import SyncGroupRequest
from kshim.storage.interface import TopicPartition
from tests.broker.access.support import (
    ADMIN,
    GROUP,
    HOST,
    OTHER,
    TOPIC,
    call,
    errors_by_topic,
    grant_cluster,
    grant_group,
    grant_topic,
    grant_transactional_id,
)

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 8, 9, 10, 11
HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 12, 13, 14, 15, 16
DELETE_GROUPS, OFFSET_DELETE = 42, 47
GAF, TAF = ErrorCode.group_authorization_failed, ErrorCode.topic_authorization_failed
AUDIT = "audit"


def commit_request(group: str, *topics: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        topics=[
            OffsetCommitRequestTopic(
                name=name,
                partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=5)],
            )
            for name in topics
        ],
    )


async def commit_as_admin(broker: Broker, group: str, *topics: str) -> None:
    answer = await call(broker, OFFSET_COMMIT, 8, commit_request(group, *topics), ADMIN)
    assert all(code == 0 for codes in errors_by_topic(answer.topics).values() for code in codes)


def committed(broker: Broker, group: str) -> set[TopicPartition]:
    return set(broker.groups.offsets.committed(group))


# JoinGroup, SyncGroup, Heartbeat, LeaveGroup


def join_request(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
    )


async def test_join_group_needs_read_on_the_group(broker: Broker) -> None:
    refused = await call(broker, JOIN_GROUP, 9, join_request())
    assert (refused.error_code, refused.generation_id, refused.member_id) == (GAF, -1, "")
    assert (refused.leader, refused.members, refused.protocol_name) == ("", [], None)
    old = await call(broker, JOIN_GROUP, 5, join_request())
    assert (old.error_code, old.protocol_name) == (GAF, "")  # not nullable before v7
    grant_group(broker, GROUP, Operation.READ)
    joined = await call(broker, JOIN_GROUP, 9, join_request())
    assert joined.error_code == ErrorCode.member_id_required  # KIP-394: the handler answered


async def test_sync_heartbeat_and_leave_need_read_on_the_group(broker: Broker) -> None:
    sync = SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m")
    heartbeat = HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m")
    leave = LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="m")])
    synced = await call(broker, SYNC_GROUP, 5, sync)
    assert (synced.error_code, synced.assignment, synced.protocol_name) == (GAF, b"", None)
    assert (await call(broker, HEARTBEAT, 4, heartbeat)).error_code == GAF
    left = await call(broker, LEAVE_GROUP, 5, leave)
    assert (left.error_code, left.members) == (GAF, [])
    grant_group(broker, GROUP, Operation.READ)
    assert (await call(broker, SYNC_GROUP, 5, sync)).error_code != GAF
    assert (await call(broker, HEARTBEAT, 4, heartbeat)).error_code != GAF
    assert (await call(broker, LEAVE_GROUP, 5, leave)).error_code == ErrorCode.none


async def test_describe_on_a_group_does_not_let_a_member_join(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.DESCRIBE)
    assert (await call(broker, JOIN_GROUP, 9, join_request())).error_code == GAF


# FindCoordinator


async def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(
    broker: Broker,
) -> None:
    refused = await call(broker, FIND_COORDINATOR, 3, FindCoordinatorRequest(key=GROUP))
    assert (refused.error_code, refused.error_message) == (GAF, "Group authorization failed.")
    assert (refused.node_id, refused.host, refused.port) == (-1, "", -1)
    transactional = FindCoordinatorRequest(key="tx", key_type=1)
    refused = await call(broker, FIND_COORDINATOR, 3, transactional)
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.transactional_id_authorization_failed,
        "Transactional Id authorization failed.",
    )
    grant_group(broker, GROUP, Operation.READ)  # implies DESCRIBE
    grant_transactional_id(broker, "tx", Operation.DESCRIBE)
    found = await call(broker, FIND_COORDINATOR, 3, FindCoordinatorRequest(key=GROUP))
    assert (found.error_code, found.node_id) == (ErrorCode.none, broker.config.node_id)
    assert (await call(broker, FIND_COORDINATOR, 3, transactional)).error_code == 0


async def test_find_coordinator_v4_refuses_each_key_on_its_own(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.DESCRIBE)
    request = FindCoordinatorRequest(coordinator_keys=[GROUP, AUDIT])
    answer = await call(broker, FIND_COORDINATOR, 4, request)
    found = {coordinator.key: coordinator for coordinator in answer.coordinators}
    assert (found[GROUP].error_code, found[GROUP].node_id) == (0, broker.config.node_id)
    refused = found[AUDIT]
    assert (refused.error_code, refused.error_message, refused.node_id) == (GAF, "", -1)


# DescribeGroups, ListGroups, DeleteGroups


async def test_describe_groups_describes_each_group_allowed(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.DESCRIBE)
    request = DescribeGroupsRequest(groups=[GROUP, AUDIT])
    answer = await call(broker, DESCRIBE_GROUPS, 5, request)
    found = {group.group_id: group for group in answer.groups}
    assert found[GROUP].error_code == ErrorCode.none
    refused = found[AUDIT]
    assert (refused.error_code, refused.group_state, refused.protocol_type) == (GAF, "", "")
    assert refused.authorized_operations == -(2**31)


async def test_list_groups_lists_describable_groups_or_all_with_describe_on_the_cluster(
    broker: Broker,
) -> None:
    await commit_as_admin(broker, GROUP, TOPIC)
    await commit_as_admin(broker, AUDIT, TOPIC)

    async def listed() -> list[str]:
        answer = await call(broker, LIST_GROUPS, 4, ListGroupsRequest())
        assert answer.error_code == ErrorCode.none
        return sorted(group.group_id for group in answer.groups)

    assert await listed() == []
    grant_group(broker, "bill", Operation.DESCRIBE, pattern=PatternType.PREFIXED)
    assert await listed() == [GROUP]
    grant_cluster(broker, Operation.DESCRIBE)
    assert await listed() == [AUDIT, GROUP]


async def test_delete_groups_needs_delete_on_each_group(broker: Broker) -> None:
    await commit_as_admin(broker, GROUP, TOPIC)
    await commit_as_admin(broker, AUDIT, TOPIC)
    grant_group(broker, GROUP, Operation.DELETE)
    answer = await call(broker, DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[GROUP, AUDIT]))
    assert {result.group_id: result.error_code for result in answer.results} == {
        GROUP: ErrorCode.none,
        AUDIT: GAF,
    }
    assert committed(broker, GROUP) == set()
    assert committed(broker, AUDIT) == {TopicPartition(TOPIC, 0)}


# OffsetCommit


async def test_offset_commit_needs_read_on_the_group_then_on_each_topic(broker: Broker) -> None:
    request = commit_request(GROUP, TOPIC, OTHER)
    refused = await call(broker, OFFSET_COMMIT, 8, request)
    assert errors_by_topic(refused.topics) == {TOPIC: [GAF], OTHER: [GAF]}
    grant_group(broker, GROUP, Operation.READ)
    grant_topic(broker, TOPIC, Operation.READ)
    answer = await call(broker, OFFSET_COMMIT, 8, request)
    assert errors_by_topic(answer.topics) == {TOPIC: [0], OTHER: [TAF]}
    assert committed(broker, GROUP) == {TopicPartition(TOPIC, 0)}


async def test_offset_commit_of_refused_topics_only_commits_nothing(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.READ)
    answer = await call(broker, OFFSET_COMMIT, 8, commit_request(GROUP, OTHER))
    assert errors_by_topic(answer.topics) == {OTHER: [TAF]}
    assert committed(broker, GROUP) == set()


async def test_offsets_of_a_view_are_committed_with_read_on_its_topic(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.READ)
    grant_topic(broker, TOPIC, Operation.READ)
    answer = await call(broker, OFFSET_COMMIT, 8, commit_request(GROUP, TOPIC + ".full"))
    assert errors_by_topic(answer.topics) == {TOPIC + ".full": [0]}


# OffsetFetch


async def fetch_offsets(broker: Broker, version: int, request: OffsetFetchRequest) -> Any:
    return await call(broker, OFFSET_FETCH, version, request)


def single(group: str, *topics: str) -> OffsetFetchRequest:
    wanted = [OffsetFetchRequestTopic(name=name, partition_indexes=[0]) for name in topics]
    return OffsetFetchRequest(group_id=group, topics=wanted or None)


async def test_offset_fetch_refuses_the_group_without_describe(broker: Broker) -> None:
    refused = await fetch_offsets(broker, 7, single(GROUP, TOPIC))
    assert (refused.error_code, refused.topics) == (GAF, [])
    # v1 has no error for the request: every partition asked for carries it.
    old = await fetch_offsets(broker, 1, single(GROUP, TOPIC))
    [partition] = old.topics[0].partitions
    assert (partition.error_code, partition.committed_offset, partition.metadata) == (GAF, -1, "")


async def test_offset_fetch_refuses_named_topics_and_hides_them_from_all(broker: Broker) -> None:
    await commit_as_admin(broker, GROUP, TOPIC, OTHER)
    grant_group(broker, GROUP, Operation.DESCRIBE)
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    named = await fetch_offsets(broker, 7, single(GROUP, TOPIC, OTHER))
    offsets = {topic.name: topic.partitions[0] for topic in named.topics}
    assert (offsets[TOPIC].error_code, offsets[TOPIC].committed_offset) == (0, 5)
    assert (offsets[OTHER].error_code, offsets[OTHER].committed_offset) == (TAF, -1)
    every = await fetch_offsets(broker, 7, single(GROUP))
    assert [topic.name for topic in every.topics] == [TOPIC]


async def test_offset_fetch_v8_decides_each_group_on_its_own(broker: Broker) -> None:
    await commit_as_admin(broker, GROUP, TOPIC, OTHER)
    await commit_as_admin(broker, AUDIT, TOPIC)
    grant_group(broker, GROUP, Operation.DESCRIBE)
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    named = [OffsetFetchRequestTopics(name=name, partition_indexes=[0]) for name in (TOPIC, OTHER)]
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(group_id=AUDIT, topics=None),
            OffsetFetchRequestGroup(group_id=GROUP, topics=named),
            OffsetFetchRequestGroup(group_id=GROUP, topics=None),
        ]
    )
    answer = await fetch_offsets(broker, 8, request)
    audit, by_name, every = answer.groups
    assert (audit.group_id, audit.error_code, audit.topics) == (AUDIT, GAF, [])
    assert errors_by_topic(by_name.topics) == {TOPIC: [0], OTHER: [TAF]}
    assert [topic.name for topic in every.topics] == [TOPIC]


# OffsetDelete


async def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(
    broker: Broker,
) -> None:
    await commit_as_admin(broker, GROUP, TOPIC, OTHER)
    request = OffsetDeleteRequest(
        group_id=GROUP,
        topics=[
            OffsetDeleteRequestTopic(
                name=name, partitions=[OffsetDeleteRequestPartition(partition_index=0)]
            )
            for name in (TOPIC, OTHER)
        ],
    )
    grant_group(broker, GROUP, Operation.READ)  # READ does not imply DELETE
    refused = await call(broker, OFFSET_DELETE, 0, request)
    assert (refused.error_code, refused.topics) == (GAF, [])
    grant_group(broker, GROUP, Operation.DELETE)
    grant_topic(broker, TOPIC, Operation.READ)
    answer = await call(broker, OFFSET_DELETE, 0, request)
    assert errors_by_topic(answer.topics) == {TOPIC: [0], OTHER: [TAF]}
    assert committed(broker, GROUP) == {TopicPartition(OTHER, 0)}


async def test_a_deny_for_one_host_leaves_other_hosts_allowed(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.DESCRIBE)
    grant_group(broker, GROUP, Operation.DESCRIBE, permission=Permission.DENY, host=HOST)
    request = FindCoordinatorRequest(key=GROUP)
    assert (await call(broker, FIND_COORDINATOR, 3, request)).error_code == GAF
    elsewhere = await call(broker, FIND_COORDINATOR, 3, request, host="10.0.0.8")
    assert elsewhere.error_code == ErrorCode.none
