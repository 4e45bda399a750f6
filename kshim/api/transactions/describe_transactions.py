"""DescribeTransactions (key 65): the coordinator's view of transactional ids."""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithTransactions
from kshim.broker.transactions.answers import TransactionDescription
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

# An unknown transactional id's: Kafka's TransactionCoordinator sets only the error, so
# the other fields are sent as their defaults (DescribeTransactionsResponse.json).
UNKNOWN_START_TIME = UNKNOWN_PRODUCER = UNKNOWN_EPOCH = 0


async def handle(
    request: DescribeTransactionsRequest, context: RequestContext[WithTransactions]
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
            transaction_start_time_ms=UNKNOWN_START_TIME,
            producer_id=UNKNOWN_PRODUCER,
            producer_epoch=UNKNOWN_EPOCH,
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
