"""AddPartitionsToTxn (key 24, v0-3): the partitions a transaction will write to."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.transactions import transaction_states as states
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition

FIRST_FENCED_VERSION = 2  # KIP-588: older versions get INVALID_PRODUCER_EPOCH


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    coordinator = broker.transactions
    transactional_id = request.v3_and_below_transactional_id
    wanted = [
        TopicPartition(topic.name, partition)
        for topic in request.v3_and_below_topics
        for partition in topic.partitions
    ]
    async with coordinator.lock(transactional_id):
        record = coordinator.records.get(transactional_id)
        error = coordinator.check_fencing(
            record,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            context.version >= FIRST_FENCED_VERSION,
        )
        if error == ErrorCode.none and record is not None and record.state in states.PREPARING:
            error = ErrorCode.concurrent_transactions
        errors = dict.fromkeys(wanted, error)
        if error == ErrorCode.none and record is not None:
            unknown = [tp for tp in wanted if broker.partition_log(tp) is None]
            errors = {
                tp: ErrorCode.unknown_topic_or_partition
                if tp in unknown
                else (ErrorCode.operation_not_attempted if unknown else ErrorCode.none)
                for tp in wanted
            }
            if not unknown:
                await coordinator.add_partitions(record, wanted)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, code in errors.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": code}
        )
    return {
        "throttle_time": 0,
        "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": results} for name, results in topics.items()
        ],
    }
