"""AddPartitionsToTxn (key 24, v0-3): the partitions a transaction will write to.

A transaction may add a partition only if Produce could write to it; any other partition
(an unknown one, or one of a read-only full-data view) is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from kshim.broker.context import RequestContext
from kshim.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kshim.storage.interface import TopicPartition

FIRST_FENCED_VERSION = 2  # KIP-588: older versions get INVALID_PRODUCER_EPOCH


async def handle(
    request: AddPartitionsToTxnRequest, context: RequestContext
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
    topics: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for topic_partition, code in errors.items():
        topics.setdefault(topic_partition.topic, []).append(
            AddPartitionsToTxnPartitionResult(
                partition_index=topic_partition.partition, partition_error_code=code
            )
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
            for name, results in topics.items()
        ],
    )
