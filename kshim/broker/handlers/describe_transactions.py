"""DescribeTransactions (key 65): the coordinator's view of transactional ids."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol.errors import ErrorCode


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    records = context.broker.transactions.records
    states = []
    for transactional_id in request.transactional_ids:
        record = records.get(transactional_id)
        if record is None:
            states.append({"error_code": ErrorCode.transactional_id_not_found,
                           "transactional_id": transactional_id, "transaction_state": "",
                           "transaction_start_time": 0, "producer_id": -1,
                           "producer_epoch": -1})  # fmt: skip
            continue
        topics: dict[str, list[int]] = {}
        for topic, partition in record.partitions:
            topics.setdefault(topic, []).append(partition)
        states.append({
            "error_code": ErrorCode.none,
            "transactional_id": transactional_id,
            "transaction_state": record.state,
            "transaction_timeout": record.timeout_ms,
            "transaction_start_time": record.started_ms,
            "producer_id": record.producer_id,
            "producer_epoch": record.producer_epoch,
            "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
        })  # fmt: skip
    return {"throttle_time": 0, "transaction_states": states}
