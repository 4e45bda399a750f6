"""EndTxn (key 26): the producer's second confirmation, commit or abort.

Markers are written to every partition of the transaction and made durable
before the answer; when that fails, the outcome is still decided (durably
prepared), so the answer is NONE, as Kafka's, and the markers are retried in the
background (transactions/marker_retries.py). A retry of a completed EndTxn with the same outcome
succeeds; a transaction with nothing added is refused (INVALID_TXN_STATE, as Kafka's
coordinator refuses state Empty); an instance fenced by a newer epoch (a newer producer,
or a review that already decided) gets PRODUCER_FENCED and cannot change the outcome
(TransactionCoordinator.end_transaction).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithTransactions
from kshim.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse

FIRST_FENCED_VERSION = 2  # KIP-588: older versions get INVALID_PRODUCER_EPOCH


async def handle(
    request: EndTxnRequest, context: RequestContext[WithTransactions]
) -> EndTxnResponse:
    error = await context.broker.transactions.end_transaction(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.committed,
        fenced_code=context.version >= FIRST_FENCED_VERSION,
    )
    return EndTxnResponse(throttle_time_ms=0, error_code=error)
