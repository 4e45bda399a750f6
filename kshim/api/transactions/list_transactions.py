"""ListTransactions (key 66): transactional ids, filtered by state and producer id."""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithTransactions
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionState,
)


async def handle(
    request: ListTransactionsRequest, context: RequestContext[WithTransactions]
) -> ListTransactionsResponse:
    listed = context.broker.transactions.list_transactions(
        set(request.state_filters), set(request.producer_id_filters)
    )
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.none,
        unknown_state_filters=[],
        transaction_states=[
            TransactionState(
                transactional_id=found.transactional_id,
                producer_id=found.producer_id,
                transaction_state=found.state,
            )
            for found in listed
        ],
    )
