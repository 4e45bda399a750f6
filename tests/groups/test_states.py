"""The group state table: every allowed transition, and every other one refused."""

from __future__ import annotations

import itertools

import pytest

from kshim.broker.groups.group import Group
from kshim.broker.groups.group_states import (
    ALLOWED_PREVIOUS,
    GroupState,
    IllegalStateTransition,
    check_transition,
    state_named,
)

# Kafka's GroupMetadata.validPreviousStates, spelled out independently of the table.
KAFKA_TRANSITIONS = {
    ("Empty", "PreparingRebalance"),
    ("PreparingRebalance", "Empty"),
    ("PreparingRebalance", "CompletingRebalance"),
    ("CompletingRebalance", "PreparingRebalance"),
    ("CompletingRebalance", "Stable"),
    ("Stable", "PreparingRebalance"),
    *((state.value, "Dead") for state in GroupState),
}


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(GroupState, repeat=2)), ids=str
)
def test_transition_table_matches_kafka(current: GroupState, target: GroupState) -> None:
    if (current.value, target.value) in KAFKA_TRANSITIONS:
        check_transition(current, target)
    else:
        with pytest.raises(IllegalStateTransition):
            check_transition(current, target)


def test_every_state_has_a_row() -> None:
    assert set(ALLOWED_PREVIOUS) == set(GroupState)


def test_group_records_when_it_changed_state() -> None:
    group = Group("g", state_since_ms=5)
    group.transition(GroupState.PREPARING_REBALANCE, 10)
    assert (group.state, group.state_since_ms) == (GroupState.PREPARING_REBALANCE, 10)
    with pytest.raises(IllegalStateTransition):
        group.transition(GroupState.STABLE, 11)
    assert group.state is GroupState.PREPARING_REBALANCE


def test_states_are_found_by_kafka_name_in_any_case() -> None:
    assert state_named("stable") is GroupState.STABLE
    assert state_named("CompletingRebalance") is GroupState.COMPLETING_REBALANCE
    assert state_named("Rebalancing") is None
