"""Transaction states and the moves between them, as one table (Kafka's TransactionState,
in the style of state_machine.py).

    Empty, CompleteCommit, CompleteAbort ──AddPartitionsToTxn──▶ Ongoing
    Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers written──▶ CompleteCommit
    Empty, Ongoing, CompleteCommit, CompleteAbort ──EndTxn(abort), timeout, fencing──▶
        PrepareAbort ──markers written──▶ CompleteAbort
    Empty, CompleteCommit, CompleteAbort ──InitProducerId──▶ Empty
"""

from __future__ import annotations

import enum

from kshim.broker.state_machine import may_enter


class TransactionState(enum.StrEnum):
    # Values are the names Kafka reports in ListTransactions and DescribeTransactions, and
    # what the transaction store keeps.
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


_ENDED = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
ALLOWED_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    TransactionState.EMPTY: _ENDED,
    TransactionState.ONGOING: _ENDED | {TransactionState.ONGOING},
    TransactionState.PREPARE_COMMIT: frozenset({TransactionState.ONGOING}),
    TransactionState.PREPARE_ABORT: _ENDED | {TransactionState.ONGOING},
    TransactionState.COMPLETE_COMMIT: frozenset({TransactionState.PREPARE_COMMIT}),
    TransactionState.COMPLETE_ABORT: frozenset({TransactionState.PREPARE_ABORT}),
}
PREPARING = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
COMPLETED = _ENDED


def can_enter(current: str, target: TransactionState) -> bool:
    """Whether a transaction in ``current`` may move to ``target``."""
    return may_enter(ALLOWED_PREVIOUS, current, target)
