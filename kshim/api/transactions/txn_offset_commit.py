"""TxnOffsetCommit (key 28): offsets that commit or abort with the transaction.

They are held in the transaction's record (durable in LMDB) and become the
group's committed offsets only when the transaction commits. As Kafka's KafkaApis,
the handler answers UNKNOWN_TOPIC_OR_PARTITION itself for a partition no consumer can
read and hands the others over; every one of those gets the one answer the group id,
the transaction's state and then the group (v3+, KIP-447: generation, member id and
group instance id) give.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.transactions.partition_answers import by_topic
from kshim.api.transactions.services import TransactionalOffsets
from kshim.broker.groups.coordinator import valid_group_id
from kshim.broker.groups.offset_commits import check_transactional_commit
from kshim.broker.topic_resolver import TopicResolver
from kshim.broker.topics import TopicError
from kshim.broker.transactions.answers import TransactionalOffset
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kshim.storage.interface import TopicPartition

FIRST_FENCED_VERSION = 3  # KIP-588: older versions get INVALID_PRODUCER_EPOCH
# KIP-890: from v4 on, offsets sent outside the group's part of the transaction (no
# AddOffsetsToTxn, or no transaction open) are TRANSACTION_ABORTABLE, as Kafka 3.9
# answers them: the producer aborts and goes on; older versions get INVALID_TXN_STATE.
FIRST_ABORTABLE_VERSION = 4


async def handle(
    request: TxnOffsetCommitRequest, context: RequestContext[TransactionalOffsets]
) -> TxnOffsetCommitResponse:
    refused = _unreadable_partitions(request, context.broker.resolver)
    offsets = [
        TransactionalOffset(
            TopicPartition(topic.name, partition.partition_index),
            partition.committed_offset,
            partition.committed_leader_epoch,
            partition.committed_metadata or "",
        )
        for topic in request.topics
        for partition in topic.partitions
        if TopicPartition(topic.name, partition.partition_index) not in refused
    ]
    error = await _commit(request, offsets, context) if offsets else ErrorCode.none
    # Kafka's response lists the partitions KafkaApis refused first, then what the group
    # coordinator answered (TxnOffsetCommitResponse.Builder.merge); the order is kept.
    answers = [*refused.items(), *((offset.topic_partition, error) for offset in offsets)]
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponseTopic(
                name=name,
                partitions=[
                    TxnOffsetCommitResponsePartition(partition_index=index, error_code=code)
                    for index, code in partitions
                ],
            )
            for name, partitions in by_topic(answers).items()
        ],
    )


async def _commit(
    request: TxnOffsetCommitRequest,
    offsets: list[TransactionalOffset],
    context: RequestContext[TransactionalOffsets],
) -> ErrorCode:
    """The one answer of every partition that exists. Kafka refuses an empty group id
    before it looks at the transaction, and the transaction before the member."""
    if not valid_group_id(request.group_id):
        return ErrorCode.invalid_group_id
    groups = context.broker.groups
    error = await context.broker.transactions.commit_offsets(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.group_id,
        offsets,
        lambda: check_transactional_commit(
            groups,
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
        ),
        fenced_code=context.version >= FIRST_FENCED_VERSION,
    )
    if error == ErrorCode.invalid_txn_state and context.version >= FIRST_ABORTABLE_VERSION:
        return ErrorCode.transaction_abortable
    return error


def _unreadable_partitions(
    request: TxnOffsetCommitRequest, resolver: TopicResolver
) -> dict[TopicPartition, ErrorCode]:
    """The error of each partition no consumer can read: UNKNOWN_TOPIC_OR_PARTITION when
    there is no such partition, the resolver's refusal for a name nobody reads."""
    errors: dict[TopicPartition, ErrorCode] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            topic_partition = TopicPartition(topic.name, partition.partition_index)
            try:
                if resolver.readable_partition(topic_partition) is None:
                    errors[topic_partition] = ErrorCode.unknown_topic_or_partition
            except TopicError as error:
                errors[topic_partition] = ErrorCode(error.code)
    return errors
