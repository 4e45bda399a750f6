"""TxnOffsetCommit (key 28): offsets that commit or abort with the transaction.

They are held in the transaction's record (durable in LMDB) and become the
group's committed offsets only when the transaction commits. Every partition
gets the one answer the transaction's state gives.
"""

from __future__ import annotations

from kshim.broker.context import RequestContext
from kshim.broker.transactions.answers import TransactionalOffset
from kshim.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kshim.storage.interface import TopicPartition

FIRST_FENCED_VERSION = 3  # KIP-588: older versions get INVALID_PRODUCER_EPOCH


async def handle(
    request: TxnOffsetCommitRequest, context: RequestContext
) -> TxnOffsetCommitResponse:
    offsets = [
        TransactionalOffset(
            TopicPartition(topic.name, partition.partition_index),
            partition.committed_offset,
            partition.committed_leader_epoch,
            partition.committed_metadata or "",
        )
        for topic in request.topics
        for partition in topic.partitions
    ]
    error = await context.broker.transactions.commit_offsets(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.group_id,
        offsets,
        fenced_code=context.version >= FIRST_FENCED_VERSION,
    )
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=partition.partition_index, error_code=error
                    )
                    for partition in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )
