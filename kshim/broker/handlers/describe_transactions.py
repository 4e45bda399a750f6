"""DescribeTransactions (key 65): the coordinator's view of transactional ids."""

from __future__ import annotations

from kshim.broker.context import RequestContext
from kshim.broker.transactions.answers import TransactionDescription
from kshim.broker.transactions.fencing import NO_EPOCH, NO_PRODUCER
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

NO_START_TIME = 0  # an unknown transactional id's, beside NO_PRODUCER and NO_EPOCH


async def handle(
    request: DescribeTransactionsRequest, context: RequestContext
) -> DescribeTransactionsResponse:
    coordinator = context.broker.transactions
    return DescribeTransactionsResponse(
        throttle_time_ms=0,
        transaction_states=[
            _state(transactional_id, coordinator.describe(transactional_id))
            for transactional_id in request.transactional_ids
        ],
    )


def _state(transactional_id: str, found: TransactionDescription | None) -> TransactionState:
    if found is None:
        return TransactionState(
            error_code=ErrorCode.transactional_id_not_found,
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout_ms=0,
            transaction_start_time_ms=NO_START_TIME,
            producer_id=NO_PRODUCER,
            producer_epoch=NO_EPOCH,
            topics=[],
        )
    topics: dict[str, list[int]] = {}
    for topic_partition in found.partitions:
        topics.setdefault(topic_partition.topic, []).append(topic_partition.partition)
    return TransactionState(
        error_code=ErrorCode.none,
        transactional_id=transactional_id,
        transaction_state=found.state,
        transaction_timeout_ms=found.timeout_ms,
        transaction_start_time_ms=found.started_ms,
        producer_id=found.producer_id,
        producer_epoch=found.producer_epoch,
        topics=[TopicData(topic=name, partitions=parts) for name, parts in topics.items()],
    )
