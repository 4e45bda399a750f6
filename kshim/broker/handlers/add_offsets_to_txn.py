"""AddOffsetsToTxn (key 25): a consumer group's offsets will be committed with the transaction."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.transactions import transaction_states as states
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    coordinator = context.broker.transactions
    async with coordinator.lock(request.transactional_id):
        record = coordinator.records.get(request.transactional_id)
        error = coordinator.check_fencing(
            record, request.producer_id, request.producer_epoch, context.version >= 2
        )
        if error == ErrorCode.none and record is not None:
            if record.state in states.PREPARING:
                error = ErrorCode.concurrent_transactions
            else:
                if request.group_id not in record.groups:
                    record.groups.append(request.group_id)
                await coordinator.add_partitions(record, [])
    return {"throttle_time": 0, "error_code": error}
