"""Transaction states and the transitions between them, as one table (Kafka's TransactionState)."""

from __future__ import annotations

EMPTY = "Empty"
ONGOING = "Ongoing"
PREPARE_COMMIT = "PrepareCommit"
PREPARE_ABORT = "PrepareAbort"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"

TRANSITIONS: dict[str, frozenset[str]] = {
    EMPTY: frozenset({ONGOING, PREPARE_ABORT, EMPTY}),
    ONGOING: frozenset({ONGOING, PREPARE_COMMIT, PREPARE_ABORT}),
    PREPARE_COMMIT: frozenset({COMPLETE_COMMIT}),
    PREPARE_ABORT: frozenset({COMPLETE_ABORT}),
    COMPLETE_COMMIT: frozenset({ONGOING, EMPTY, PREPARE_ABORT}),
    COMPLETE_ABORT: frozenset({ONGOING, EMPTY, PREPARE_ABORT}),
}
PREPARING = frozenset({PREPARE_COMMIT, PREPARE_ABORT})
COMPLETED = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})


def can_move(current: str, target: str) -> bool:
    return target in TRANSITIONS[current]
