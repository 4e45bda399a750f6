"""The transaction state table against Kafka's TransactionState.validPreviousStates
(PrepareEpochFence and Dead left out: kshim fences and expires without them)."""

from __future__ import annotations

import itertools

import pytest

from kshim.broker.state_machine import IllegalStateTransition, check_transition
from kshim.broker.transactions.transaction_states import (
    ALLOWED_PREVIOUS,
    TransactionState,
    can_enter,
)

KAFKA_VALID_PREVIOUS = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
}


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(TransactionState, TransactionState))
)
def test_every_move_is_allowed_exactly_when_kafka_allows_it(
    current: TransactionState, target: TransactionState
) -> None:
    allowed = current.value in KAFKA_VALID_PREVIOUS[target.value]
    assert can_enter(current, target) is allowed
    assert can_enter(current.value, target) is allowed  # a name read back from storage
    if allowed:
        check_transition(ALLOWED_PREVIOUS, current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=f"{current} -> {target}"):
            check_transition(ALLOWED_PREVIOUS, current, target)


def test_the_names_are_kafkas() -> None:
    assert {state.value for state in TransactionState} == set(KAFKA_VALID_PREVIOUS)
