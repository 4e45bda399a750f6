"""TxnOffsetCommit (key 28): offsets that commit or abort with the transaction.

They are held in the transaction's record (durable in LMDB) and become the
group's committed offsets only when the transaction commits.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.transactions import transaction_states as states
from kshim.protocol.errors import ErrorCode

NO_LEADER_EPOCH = -1


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    coordinator = broker.transactions
    async with coordinator.lock(request.transactional_id):
        record = coordinator.records.get(request.transactional_id)
        error = coordinator.check_fencing(
            record, request.producer_id, request.producer_epoch, context.version >= 3
        )
        not_added = record is not None and request.group_id not in record.groups
        if error == ErrorCode.none and (not_added or (record and record.state != states.ONGOING)):
            error = ErrorCode.invalid_txn_state
        if error == ErrorCode.none and record is not None:
            for topic in request.topics:
                for partition in topic.partitions:
                    record.pending_offsets.append([
                        request.group_id, topic.name, partition.partition_index,
                        partition.committed_offset,
                        getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH),
                        partition.committed_metadata or "",
                    ])  # fmt: skip
            await coordinator.persist(record)
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": partition.partition_index, "error_code": error}
                    for partition in topic.partitions
                ],
            }
            for topic in request.topics
        ],
    }
