"""AddOffsetsToTxn (key 25): a consumer group's offsets will be committed with the transaction."""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithTransactions
from kshim.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)

FIRST_FENCED_VERSION = 2  # KIP-588: older versions get INVALID_PRODUCER_EPOCH


async def handle(
    request: AddOffsetsToTxnRequest, context: RequestContext[WithTransactions]
) -> AddOffsetsToTxnResponse:
    error = await context.broker.transactions.add_offsets(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.group_id,
        fenced_code=context.version >= FIRST_FENCED_VERSION,
    )
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
