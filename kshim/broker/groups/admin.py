"""Group administration and offset rules over the coordinator's state.

OffsetCommit fencing (Kafka's GroupCoordinator.handleCommitOffsets), the
views behind ListGroups and DescribeGroups, DeleteGroups, OffsetDelete, and
the retention pass that expires offsets of empty groups. A group known only
from committed offsets (a standalone consumer, or any group after a broker
restart, since membership is not persisted) is reported as Empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kshim.broker.groups.coordinator import GroupCoordinator, valid_group_id
from kshim.broker.groups.group import Group
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.member import Member
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition

# Kafka's GroupType for classic groups (ListGroups v5 types filter, KIP-848).
CLASSIC_GROUP_TYPE = "classic"


def check_commit(
    coordinator: GroupCoordinator,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
) -> ErrorCode:
    """Whether this member may commit offsets for the group now.

    Generation -1 with no member is a standalone commit, allowed while the
    group has no members. Commits are allowed in PreparingRebalance, so
    members can commit what they consumed when their partitions are revoked.
    """
    if not valid_group_id(group_id):
        return ErrorCode.invalid_group_id
    group = coordinator.groups.get(group_id)
    if group is None:
        return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
    if group.state is GroupState.DEAD:
        return ErrorCode.coordinator_not_available
    instance_error = group.check_member(member_id, group_instance_id)
    if instance_error is ErrorCode.fenced_instance_id:
        return instance_error
    if generation_id < 0 and group.state is GroupState.EMPTY:
        return ErrorCode.none
    if group.state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.rebalance_in_progress
    if instance_error is not None:
        return instance_error
    if generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    group.members[member_id].last_activity_ms = coordinator.clock()
    return ErrorCode.none


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    state: GroupState
    protocol_type: str


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    members: tuple[Member, ...]


def list_groups(coordinator: GroupCoordinator) -> list[GroupOverview]:
    """Every live group, and every group that only has committed offsets."""
    overviews = [
        GroupOverview(group.group_id, group.state, group.protocol_type or "")
        for group in coordinator.groups.values()
        if group.state is not GroupState.DEAD
    ]
    known = {overview.group_id for overview in overviews}
    overviews += [
        GroupOverview(group_id, GroupState.EMPTY, "")
        for group_id in coordinator.offsets.group_ids()
        if group_id not in known
    ]
    return sorted(overviews, key=lambda overview: overview.group_id)


def describe_group(coordinator: GroupCoordinator, group_id: str) -> GroupDescription:
    """The group as DescribeGroups shows it; an unknown group is Dead (as Kafka before v6)."""
    group = coordinator.groups.get(group_id)
    if group is None:
        known = group_id in coordinator.offsets.group_ids()
        state = GroupState.EMPTY if known else GroupState.DEAD
        return GroupDescription(group_id, state, "", "", ())
    stable = group.state is GroupState.STABLE
    return GroupDescription(
        group_id,
        group.state,
        group.protocol_type or "",
        (group.protocol_name or "") if stable else "",
        tuple(group.members.values()),
    )


async def delete_group(coordinator: GroupCoordinator, group_id: str) -> ErrorCode:
    """Deletes an empty group and its offsets (DeleteGroups)."""
    if not valid_group_id(group_id):
        return ErrorCode.invalid_group_id
    group = coordinator.groups.get(group_id)
    has_offsets = group_id in coordinator.offsets.group_ids()
    if group is None and not has_offsets:
        return ErrorCode.group_id_not_found
    if group is not None and not group.is_empty():
        return ErrorCode.non_empty_group
    # Dead before the write: a member joining meanwhile starts a new group.
    _forget_group(coordinator, group_id)
    await coordinator.offsets.delete_group(group_id)
    return ErrorCode.none


async def delete_offsets(
    coordinator: GroupCoordinator, group_id: str, partitions: Iterable[TopicPartition]
) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """OffsetDelete: forgets offsets of topics the group does not subscribe to (KIP-496)."""
    wanted = list(partitions)
    group = coordinator.groups.get(group_id)
    if not valid_group_id(group_id):
        return ErrorCode.invalid_group_id, {}
    if group is None and group_id not in coordinator.offsets.group_ids():
        return ErrorCode.group_id_not_found, {}
    subscribed = _subscribed_topics(group)
    if subscribed is None:
        return ErrorCode.non_empty_group, {}
    errors = {
        tp: ErrorCode.group_subscribed_to_topic if tp.topic in subscribed else ErrorCode.none
        for tp in wanted
    }
    await coordinator.offsets.delete(
        group_id, [tp for tp, error in errors.items() if error is ErrorCode.none]
    )
    return ErrorCode.none, errors


def _subscribed_topics(group: Group | None) -> frozenset[str] | None:
    """Topics the group's members subscribe to; None when it has members but they are unknown."""
    if group is None or group.is_empty():
        return frozenset()
    return group.subscribed_topics()


async def expire_offsets_once(
    coordinator: GroupCoordinator, topic_exists: Callable[[str], bool]
) -> int:
    """One retention pass; returns how many offsets were removed.

    Removes offsets of empty groups older than ``offsets.retention.minutes``
    and offsets of topics that no longer exist, then forgets empty groups
    that have no offsets left.
    """
    now = coordinator.clock()
    retention_ms = coordinator.settings.offsets_retention_ms
    removed = 0
    for group_id in coordinator.offsets.group_ids():
        group = coordinator.groups.get(group_id)
        doomed = set(coordinator.offsets.partitions_where(group_id, _topic_gone(topic_exists)))
        if group is None or group.is_empty():
            empty_since = group.state_since_ms if group is not None else 0
            doomed |= set(coordinator.offsets.expired(group_id, now, retention_ms, empty_since))
        await coordinator.offsets.delete(group_id, doomed)
        removed += len(doomed)
    for group in list(coordinator.groups.values()):
        if group.is_empty() and group.group_id not in coordinator.offsets.group_ids():
            _forget_group(coordinator, group.group_id)
    return removed


async def drop_topic_offsets(coordinator: GroupCoordinator, topic: str) -> int:
    """Removes every group's offsets of ``topic`` as it is deleted, as Kafka does; the
    retention pass would only catch them minutes later, after a topic recreated under
    the name could already be read from the old positions. Returns how many."""
    removed = 0
    for group_id in coordinator.offsets.group_ids():
        doomed = coordinator.offsets.partitions_where(group_id, lambda tp: tp.topic == topic)
        await coordinator.offsets.delete(group_id, doomed)
        removed += len(doomed)
    return removed


def _topic_gone(topic_exists: Callable[[str], bool]) -> Callable[[TopicPartition], bool]:
    return lambda topic_partition: not topic_exists(topic_partition.topic)


def _forget_group(coordinator: GroupCoordinator, group_id: str) -> None:
    group = coordinator.groups.pop(group_id, None)
    if group is not None:
        group.transition(GroupState.DEAD, coordinator.clock())
        coordinator.timers.cancel(("join", group_id))
