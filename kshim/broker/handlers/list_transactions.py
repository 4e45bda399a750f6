"""ListTransactions (key 66): transactional ids, filtered by state and producer id."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    wanted_states = set(request.state_filters)
    wanted_producers = set(request.producer_id_filters)
    listed = [
        {
            "transactional_id": record.transactional_id,
            "producer_id": record.producer_id,
            "transaction_state": record.state,
        }
        for record in context.broker.transactions.records.values()
        if (not wanted_states or record.state in wanted_states)
        and (not wanted_producers or record.producer_id in wanted_producers)
    ]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "unknown_state_filters": [],
        "transaction_states": listed,
    }
