"""OffsetCommit, OffsetFetch and OffsetDelete as the group coordinator answers them.

Kafka's GroupCoordinator.handleCommitOffsets, handleFetchOffsets and
handleDeleteOffsets. As in Kafka, the handler (KafkaApis there) answers
UNKNOWN_TOPIC_OR_PARTITION itself for partitions no consumer can read and hands
over the rest; everything here is about the group: who may commit, what is
stored and for how long, what an open transaction holds back, and which offsets
the group still needs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kshim.broker.groups.coordinator import GroupCoordinator, valid_group_id
from kshim.broker.groups.group import Group
from kshim.broker.groups.group_states import GroupState
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.committed_offsets import NO_EXPIRY, CommittedOffset

# What OffsetFetch answers for a partition the group committed nothing for.
NOTHING_COMMITTED = CommittedOffset(offset=-1, leader_epoch=-1, metadata="", commit_timestamp=-1)
DEFAULT_RETENTION = -1  # OffsetCommit v2-4 retention_time: use offsets.retention.minutes


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    offset: int
    leader_epoch: int  # -1 when the client did not say (OffsetCommit < v6)
    metadata: str  # a null metadata string is stored as ""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation_id: int  # -1 with no member id: a standalone consumer
    member_id: str
    group_instance_id: str | None
    retention_ms: int  # OffsetCommit v2-4 retention_time; DEFAULT_RETENTION otherwise
    offsets: Mapping[TopicPartition, PartitionCommit]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic_partition: TopicPartition
    committed: CommittedOffset  # NOTHING_COMMITTED when the group has none
    error: ErrorCode


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
    group.members[member_id].last_activity_ms = coordinator.clock.monotonic()
    return ErrorCode.none


def check_transactional_commit(
    coordinator: GroupCoordinator,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
) -> ErrorCode:
    """Whether a TxnOffsetCommit from this member may commit for the group (KIP-447).

    Kafka's ClassicGroup.validateOffsetCommit for transactional commits, as Kafka 3.9
    answers them: generation -1 commits to a group without members whoever sends it (a
    producer that consumes outside group management); otherwise a member id, a group
    instance id or a generation makes the request a member's, which must be current:
    UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as for a heartbeat, then ILLEGAL_GENERATION.
    With neither, nothing is checked (TxnOffsetCommit v0-v2 carry none of them). Unlike
    OffsetCommit, a group completing a rebalance is no reason to refuse: the offsets wait
    for the transaction anyway. The caller has checked the group id.
    """
    group = coordinator.groups.get(group_id)
    if group is not None and group.state is GroupState.DEAD:
        return ErrorCode.coordinator_not_available
    empty = group is None or group.state is GroupState.EMPTY
    if generation_id < 0 and empty:
        return ErrorCode.none
    if generation_id < 0 and not member_id and group_instance_id is None:
        return ErrorCode.none
    if group is None:
        return ErrorCode.unknown_member_id  # Kafka creates the group, empty, and asks it
    member_error = _current_member_error(group, member_id, group_instance_id)
    if member_error is not None:
        return member_error
    if generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    return ErrorCode.none


def _current_member_error(
    group: Group, member_id: str, group_instance_id: str | None
) -> ErrorCode | None:
    """Kafka's ClassicGroup.validateMember: a static member is known by its instance id
    (UNKNOWN_MEMBER_ID when it has none in the group, FENCED_INSTANCE_ID when another
    member id holds it), a dynamic one by its member id."""
    if group_instance_id is not None:
        current = group.static_members.get(group_instance_id)
        if current is None:
            return ErrorCode.unknown_member_id
        return None if current == member_id else ErrorCode.fenced_instance_id
    return None if member_id in group.members else ErrorCode.unknown_member_id


async def commit_offsets(
    coordinator: GroupCoordinator, request: CommitRequest
) -> dict[TopicPartition, ErrorCode]:
    """Stores the offsets the member may commit, durably (one fsynced write), and returns
    each partition's error.

    Fencing applies to the whole request; then metadata longer than
    ``offset.metadata.max.bytes`` is refused per partition (OFFSET_METADATA_TOO_LARGE).
    A retention time (OffsetCommit v2-4) sets the offsets' expiry, as in Kafka.
    """
    fenced = check_commit(
        coordinator,
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id,
    )
    if fenced is not ErrorCode.none:
        return dict.fromkeys(request.offsets, fenced)
    now = coordinator.clock()
    retention_ms = request.retention_ms
    expire_timestamp = now + retention_ms if retention_ms >= 0 else NO_EXPIRY
    max_metadata_bytes = coordinator.settings.max_metadata_bytes
    errors: dict[TopicPartition, ErrorCode] = {}
    accepted: dict[TopicPartition, CommittedOffset] = {}
    for topic_partition, commit in request.offsets.items():
        if len(commit.metadata.encode("utf-8")) > max_metadata_bytes:
            errors[topic_partition] = ErrorCode.offset_metadata_too_large
            continue
        errors[topic_partition] = ErrorCode.none
        accepted[topic_partition] = CommittedOffset(
            commit.offset, commit.leader_epoch, commit.metadata, now, expire_timestamp
        )
    await coordinator.offsets.commit(request.group_id, accepted)
    return errors


def fetch_offsets(
    coordinator: GroupCoordinator,
    group_id: str,
    partitions: Sequence[TopicPartition] | None,
    unstable: Collection[TopicPartition] = frozenset(),
) -> tuple[ErrorCode, list[FetchedOffset]]:
    """(group error, each partition's committed offset) for OffsetFetch.

    ``partitions`` None asks for every partition the group committed (OffsetFetch
    v2+ with null topics), in topic and partition order. Partitions in ``unstable``,
    whose offsets an open transaction is about to commit, get UNSTABLE_OFFSET_COMMIT
    (require_stable, KIP-447), so the client asks again.
    """
    if not valid_group_id(group_id):
        return ErrorCode.invalid_group_id, []
    committed = coordinator.offsets.committed(group_id)
    wanted = sorted(committed) if partitions is None else partitions
    return ErrorCode.none, [
        FetchedOffset(
            topic_partition,
            committed.get(topic_partition, NOTHING_COMMITTED),
            ErrorCode.unstable_offset_commit if topic_partition in unstable else ErrorCode.none,
        )
        for topic_partition in wanted
    ]


async def delete_offsets(
    coordinator: GroupCoordinator, group_id: str, partitions: Iterable[TopicPartition]
) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """OffsetDelete: forgets offsets of topics the group does not subscribe to (KIP-496).

    Returns the group's error, else each partition's: GROUP_SUBSCRIBED_TO_TOPIC for a
    topic a live member subscribes to. A group with members whose subscriptions cannot
    be read (not a consumer group) gets NON_EMPTY_GROUP.
    """
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
