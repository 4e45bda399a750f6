"""DescribeProducers (key 61): the idempotent/transactional producers a partition knows."""

from __future__ import annotations

from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            topic_partition = TopicPartition(topic.name, index)
            if broker.partition_log(topic_partition) is None:
                partitions.append({"partition_index": index,
                                   "error_code": ErrorCode.unknown_topic_or_partition,
                                   "error_message": None, "active_producers": []})  # fmt: skip
                continue
            open_transactions = broker.transactions.partition(topic_partition).open
            producers = [
                {
                    "producer_id": producer_id,
                    "producer_epoch": entry.epoch,
                    "last_sequence": entry.last_sequence,
                    "last_timestamp": entry.last_timestamp,
                    "coordinator_epoch": -1,
                    "current_txn_start_offset": (
                        open_transactions[producer_id].first_offset
                        if producer_id in open_transactions
                        else -1
                    ),
                }
                for producer_id, entry in broker.producer_state(topic_partition).producers.items()
            ]
            partitions.append({"partition_index": index, "error_code": ErrorCode.none,
                               "error_message": None, "active_producers": producers})  # fmt: skip
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
