"""Group administration over the coordinator's state, and offset retention.

The views behind ListGroups and DescribeGroups (Kafka's GroupCoordinator
handleListGroups and handleDescribeGroup, with GroupMetadata.summary),
DeleteGroups, and the retention pass that expires offsets of empty groups and
of topics that are gone. A group known only from committed offsets (a
standalone consumer, or any group after a broker restart, since membership is
not persisted) is reported as Empty.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from kshim.broker.groups.coordinator import GroupCoordinator, valid_group_id
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.member import Member
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition

# Kafka's GroupType for classic groups (ListGroups v5 types filter, KIP-848).
CLASSIC_GROUP_TYPE = "classic"
NO_STATE = ""  # Kafka's GroupCoordinator.NoState: the state of a group that was not described


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    state: GroupState
    protocol_type: str
    group_type: str = CLASSIC_GROUP_TYPE  # every kshim group is a classic one


@dataclass(frozen=True, slots=True)
class MemberSummary:
    """A member as DescribeGroups shows it; metadata and assignment only in a Stable group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: GroupState | None  # None when the group could not be described (``error``)
    protocol_type: str
    protocol_name: str  # "" unless Stable
    members: tuple[MemberSummary, ...]

    @property
    def state_name(self) -> str:
        """The state as Kafka names it, or NO_STATE."""
        return NO_STATE if self.state is None else self.state.value


def list_groups(
    coordinator: GroupCoordinator,
    states: Collection[str] = (),
    types: Collection[str] = (),
) -> list[GroupOverview]:
    """Every live group, and every group that only has committed offsets, by group id.

    Non-empty ``states`` (ListGroups v4+, KIP-518) and ``types`` (v5+, KIP-848) keep
    the groups whose state and type they name, compared case-insensitively.
    """
    if types and CLASSIC_GROUP_TYPE not in {group_type.lower() for group_type in types}:
        return []
    wanted_states = {state.lower() for state in states}
    return [
        overview
        for overview in _all_groups(coordinator)
        if not wanted_states or overview.state.value.lower() in wanted_states
    ]


def _all_groups(coordinator: GroupCoordinator) -> list[GroupOverview]:
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
    """The group as DescribeGroups shows it: INVALID_GROUP_ID with no state for an invalid
    id; an unknown group is Dead with no error (as Kafka before DescribeGroups v6)."""
    if not valid_group_id(group_id):
        return GroupDescription(group_id, ErrorCode.invalid_group_id, None, "", "", ())
    group = coordinator.groups.get(group_id)
    if group is None:
        known = group_id in coordinator.offsets.group_ids()
        state = GroupState.EMPTY if known else GroupState.DEAD
        return GroupDescription(group_id, ErrorCode.none, state, "", "", ())
    stable = group.state is GroupState.STABLE
    protocol_name = (group.protocol_name or "") if stable else ""
    return GroupDescription(
        group_id,
        ErrorCode.none,
        group.state,
        group.protocol_type or "",
        protocol_name,
        tuple(_summary(member, protocol_name, stable) for member in group.members.values()),
    )


def _summary(member: Member, protocol_name: str, stable: bool) -> MemberSummary:
    return MemberSummary(
        member.member_id,
        member.group_instance_id,
        member.client_id,
        member.client_host,
        member.metadata_for(protocol_name) if stable else b"",
        member.assignment if stable else b"",
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


async def expire_offsets_once(
    coordinator: GroupCoordinator, topic_exists: Callable[[str], bool]
) -> int:
    """One retention pass; returns how many offsets were removed.

    Removes offsets of empty groups older than ``offsets.retention.minutes``
    and offsets of topics for which ``topic_exists`` is false (a name consumers
    can no longer read), then forgets empty groups that have no offsets left.
    """
    now = coordinator.clock.expiry_now()  # deletion by age (kshim/broker/clock.py)
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


async def drop_topic_offsets(coordinator: GroupCoordinator, *topics: str) -> int:
    """Removes every group's offsets of ``topics`` as they are deleted (a topic, and its
    full-data view if it had one), as Kafka does; the retention pass would only catch
    them minutes later, after a topic recreated under the name could already be read
    from the old positions. Returns how many."""
    names = frozenset(topics)
    removed = 0
    for group_id in coordinator.offsets.group_ids():
        doomed = coordinator.offsets.partitions_where(group_id, lambda tp: tp.topic in names)
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
