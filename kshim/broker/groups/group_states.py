"""The classic group state machine, as a table (Kafka's GroupMetadata.scala, KIP-345).

    Empty ──a member joins──▶ PreparingRebalance
    PreparingRebalance ──every member rejoined, or the rebalance timeout──▶ CompletingRebalance
    PreparingRebalance ──no member left──▶ Empty
    CompletingRebalance ──the leader's SyncGroup──▶ Stable
    CompletingRebalance, Stable ──a member joins, leaves or expires──▶ PreparingRebalance

Dead is terminal: the group was deleted (DeleteGroups, or expiry of an empty
group with no offsets left). ``ALLOWED_PREVIOUS`` lists, for each state, the
states it may be entered from (state_machine.py); anything else is a coordinator bug.
"""

from __future__ import annotations

import enum

from kshim.broker.state_machine import IllegalStateTransition
from kshim.broker.state_machine import check_transition as check_move

__all__ = ["ALLOWED_PREVIOUS", "GroupState", "IllegalStateTransition", "check_transition"]


class GroupState(enum.StrEnum):
    # Values are the names Kafka reports in ListGroups and DescribeGroups.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


ALLOWED_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.COMPLETING_REBALANCE, GroupState.STABLE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
            GroupState.DEAD,
        }
    ),
}


def check_transition(current: GroupState, target: GroupState) -> None:
    """Raises IllegalStateTransition unless ``current -> target`` is in the table."""
    check_move(ALLOWED_PREVIOUS, current, target)


def state_named(name: str) -> GroupState | None:
    """The state Kafka calls ``name`` (case-insensitive, as ListGroups filters), or None."""
    for state in GroupState:
        if state.value.lower() == name.lower():
            return state
    return None
