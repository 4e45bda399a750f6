"""EndTxn (key 26): the producer's second confirmation, commit or abort.

Markers are written to every partition of the transaction and made durable
before the answer. A retry of a completed EndTxn with the same outcome
succeeds; an instance fenced by a newer epoch (a newer producer, or a review
that already decided) gets PRODUCER_FENCED and cannot change the outcome.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.transactions import transaction_states as states
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    coordinator = context.broker.transactions
    commit = bool(request.committed)
    async with coordinator.lock(request.transactional_id):
        record = coordinator.records.get(request.transactional_id)
        error = coordinator.check_fencing(
            record, request.producer_id, request.producer_epoch, context.version >= 2
        )
        if error == ErrorCode.none and record is not None:
            done = states.COMPLETE_COMMIT if commit else states.COMPLETE_ABORT
            if record.state == states.ONGOING:
                await coordinator.end(record, commit)
            elif record.state in (done, states.EMPTY):
                pass  # a retry, or a transaction that wrote nothing
            elif record.state in states.PREPARING:
                error = ErrorCode.concurrent_transactions
            else:
                error = ErrorCode.invalid_txn_state
    return {"throttle_time": 0, "error_code": error}
