"""AddPartitionsToTxn (key 24, v0-3): the partitions a transaction will write to.

A transaction may add a partition only if Produce could write to it; any other partition
(an unknown one, or one of a read-only full-data view) is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from collections.abc import Mapping

from kshim.api.context import RequestContext
from kshim.api.transactions.partition_answers import by_topic
from kshim.api.transactions.services import TransactionsAndTopics
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kshim.storage.interface import TopicPartition

FIRST_FENCED_VERSION = 2  # KIP-588: older versions get INVALID_PRODUCER_EPOCH


async def handle(
    request: AddPartitionsToTxnRequest, context: RequestContext[TransactionsAndTopics]
) -> AddPartitionsToTxnResponse:
    errors = await context.broker.transactions.add_partitions(
        request.v3_and_below_transactional_id,
        request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch,
        [
            TopicPartition(topic.name, partition)
            for topic in request.v3_and_below_topics
            for partition in topic.partitions
        ],
        context.broker.resolver.is_writable,
        fenced_code=context.version >= FIRST_FENCED_VERSION,
    )
    return added(errors)


def added(errors: Mapping[TopicPartition, ErrorCode]) -> AddPartitionsToTxnResponse:
    """The answer giving each partition of ``errors`` its error code."""
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(
                name=name,
                results_by_partition=[
                    AddPartitionsToTxnPartitionResult(
                        partition_index=index, partition_error_code=code
                    )
                    for index, code in partitions
                ],
            )
            for name, partitions in by_topic(errors.items()).items()
        ],
    )
