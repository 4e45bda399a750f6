"""TxnOffsetCommit's member check (KIP-447), the group coordinator's part: every rule
against a group that does not exist, a stable dynamic member and a stable static one.
compat_tests/test_txn_offset_fencing.py sends the same requests to kshim and Kafka."""

from __future__ import annotations

import pytest

from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.offset_commits import check_transactional_commit
from kshim.protocol.errors import ErrorCode
from tests.groups.support import GROUP, stable_member

NONE = ErrorCode.none
ILLEGAL_GENERATION = ErrorCode.illegal_generation
UNKNOWN_MEMBER = ErrorCode.unknown_member_id
FENCED = ErrorCode.fenced_instance_id
INSTANCE = "instance-1"


@pytest.mark.parametrize(
    ("generation", "member", "instance", "expected"),
    [
        (-1, "", None, NONE),
        (-1, "someone", None, NONE),  # generation -1 and no members: nobody to check against
        (-1, "", INSTANCE, NONE),
        (0, "", None, UNKNOWN_MEMBER),  # a generation makes the sender a member, of nothing
        (1, "someone", None, UNKNOWN_MEMBER),
    ],
)
def test_a_group_without_members(
    coordinator: GroupCoordinator,
    generation: int,
    member: str,
    instance: str | None,
    expected: ErrorCode,
) -> None:
    assert check_transactional_commit(coordinator, GROUP, generation, member, instance) == expected


async def test_a_stable_dynamic_member(coordinator: GroupCoordinator) -> None:
    joined = await stable_member(coordinator)
    member, generation = joined.member_id, joined.generation_id

    def check(generation_id: int, member_id: str, instance: str | None = None) -> ErrorCode:
        return check_transactional_commit(coordinator, GROUP, generation_id, member_id, instance)

    assert check(generation, member) == NONE
    assert check(-1, "") == NONE  # v0-v2 carry no member: not checked
    assert check(generation + 1, member) == ILLEGAL_GENERATION
    assert check(-1, member) == ILLEGAL_GENERATION
    assert check(generation, "someone") == UNKNOWN_MEMBER
    assert check(generation, "") == UNKNOWN_MEMBER
    assert check(generation, member, INSTANCE) == UNKNOWN_MEMBER  # no such static member
    assert check(-1, "", INSTANCE) == UNKNOWN_MEMBER


async def test_a_stable_static_member(coordinator: GroupCoordinator) -> None:
    joined = await stable_member(coordinator, instance_id=INSTANCE)
    member, generation = joined.member_id, joined.generation_id

    def check(generation_id: int, member_id: str, instance: str | None) -> ErrorCode:
        return check_transactional_commit(coordinator, GROUP, generation_id, member_id, instance)

    assert check(generation, member, INSTANCE) == NONE
    assert check(generation, member, None) == NONE  # known by its member id too
    assert check(generation, "someone", INSTANCE) == FENCED
    assert check(-1, "", INSTANCE) == FENCED
    assert check(generation, member, "instance-2") == UNKNOWN_MEMBER
    assert check(generation + 1, member, INSTANCE) == ILLEGAL_GENERATION


async def test_a_group_whose_members_left_takes_generation_minus_one_only(
    coordinator: GroupCoordinator,
) -> None:
    joined = await stable_member(coordinator)
    assert coordinator.leave(GROUP, joined.member_id, None) == NONE
    assert coordinator.groups[GROUP].state is GroupState.EMPTY

    assert check_transactional_commit(coordinator, GROUP, -1, joined.member_id, None) == NONE
    assert (
        check_transactional_commit(coordinator, GROUP, joined.generation_id, joined.member_id, None)
        == UNKNOWN_MEMBER
    )


async def test_a_dead_group_has_no_coordinator(coordinator: GroupCoordinator) -> None:
    await stable_member(coordinator)
    coordinator.groups[GROUP].state = GroupState.DEAD

    assert check_transactional_commit(coordinator, GROUP, -1, "", None) == (
        ErrorCode.coordinator_not_available
    )
