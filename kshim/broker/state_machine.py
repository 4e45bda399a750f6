"""One style for the broker's state machines, as Kafka writes its GroupState and
TransactionState: the states are an enum whose values are the names Kafka reports (a
StrEnum, so a name read back from storage or a request compares equal to its state),
and a table gives, for each state, the states it may be entered from (Kafka's
``validPreviousStates``). A move the table does not allow is a bug of the coordinator."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

State = TypeVar("State", bound=enum.StrEnum)


class IllegalStateTransition(RuntimeError):
    """A coordinator tried a move its table does not allow (a kshim bug)."""


def may_enter(
    allowed_previous: Mapping[State, frozenset[State]], current: str, target: State
) -> bool:
    """Whether ``target`` may be entered from ``current``."""
    return current in allowed_previous[target]


def check_transition(
    allowed_previous: Mapping[State, frozenset[State]], current: str, target: State
) -> None:
    """Raises IllegalStateTransition unless ``current -> target`` is in the table."""
    if not may_enter(allowed_previous, current, target):
        raise IllegalStateTransition(f"{current} -> {target}")
