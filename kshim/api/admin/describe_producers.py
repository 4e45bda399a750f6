"""DescribeProducers (key 61): the idempotent/transactional producers a partition knows."""

from __future__ import annotations

from kshim.api.admin.services import ProducerServices
from kshim.api.context import RequestContext
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kshim.storage.interface import TopicPartition

NO_COORDINATOR_EPOCH = -1


async def handle(
    request: DescribeProducersRequest, context: RequestContext[ProducerServices]
) -> DescribeProducersResponse:
    topics = [
        TopicResponse(
            name=topic.name,
            partitions=[
                _partition(context.broker, TopicPartition(topic.name, index))
                for index in topic.partition_indexes
            ],
        )
        for topic in request.topics
    ]
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def _partition(broker: ProducerServices, topic_partition: TopicPartition) -> PartitionResponse:
    """A log's producers; a partition Produce cannot write to (unknown, or a read-only
    view's) keeps no producer state and is UNKNOWN_TOPIC_OR_PARTITION."""
    if not broker.resolver.is_writable(topic_partition):
        return PartitionResponse(
            partition_index=topic_partition.partition,
            error_code=ErrorCode.unknown_topic_or_partition,
            error_message=None,
            active_producers=[],
        )
    transactions = broker.transactions.partition(topic_partition)
    state = broker.partitions.producer_state(topic_partition)
    producers = [
        ProducerState(
            producer_id=producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_sequence,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=NO_COORDINATOR_EPOCH,
            current_txn_start_offset=transactions.transaction_start_offset(producer_id),
        )
        for producer_id, entry in state.producers.items()
    ]
    return PartitionResponse(
        partition_index=topic_partition.partition,
        error_code=ErrorCode.none,
        error_message=None,
        active_producers=producers,
    )
