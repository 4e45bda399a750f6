"""The access rules of the transaction APIs (KafkaApis.handleInitProducerIdRequest,
handleAddPartitionsToTxnRequest, handleAddOffsetsToTxnRequest, handleEndTxnRequest,
handleTxnOffsetCommitRequest; DescribeTransactions' and ListTransactions' are in
admin_access.py, loaded with their routes).

A transactional producer needs WRITE on its transactional id for every step, and WRITE
on the topics it writes to; the group whose offsets it commits needs READ, and so do
their topics. An idempotent producer's id needs IDEMPOTENT_WRITE on the cluster or WRITE
on some topic (KIP-679).
"""

from __future__ import annotations

from typing import Protocol

from kshim.api.access.permissions import Permissions
from kshim.api.access.refusals import (
    Listing,
    item_by_item,
    partition_by_partition,
    topics_need,
    whole_first,
)
from kshim.api.access.rule import Handler, all_or_nothing
from kshim.api.context import RequestContext
from kshim.api.transactions import add_partitions_to_txn
from kshim.protocol.acls import Operation, ResourceType
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from kshim.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from kshim.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kshim.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from kshim.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kshim.storage.interface import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


async def init_producer_id_rule(
    request: InitProducerIdRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[InitProducerIdRequest, InitProducerIdResponse],
) -> InitProducerIdResponse:
    transactional_id = request.transactional_id
    if transactional_id is not None:
        if not permissions.allows_transactional_id(Operation.WRITE, transactional_id):
            return _no_producer_id(ErrorCode.transactional_id_authorization_failed)
    elif not (
        permissions.allows_cluster(Operation.IDEMPOTENT_WRITE)
        or permissions.allows_some(Operation.WRITE, ResourceType.TOPIC)
    ):
        return _no_producer_id(ErrorCode.cluster_authorization_failed)
    return await handle(request, context)


def _no_producer_id(error: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=error,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
    )


async def add_partitions_to_txn_rule(
    request: AddPartitionsToTxnRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[AddPartitionsToTxnRequest, AddPartitionsToTxnResponse],
) -> AddPartitionsToTxnResponse:
    """WRITE on the transactional id, or every partition is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on every topic, or the transaction adds
    none: a refused topic's partitions are TOPIC_AUTHORIZATION_FAILED, a partition Produce
    could not write to UNKNOWN_TOPIC_OR_PARTITION, and the rest OPERATION_NOT_ATTEMPTED."""
    partitions = [
        TopicPartition(topic.name, index)
        for topic in request.v3_and_below_topics
        for index in topic.partitions
    ]
    if not permissions.allows_transactional_id(
        Operation.WRITE, request.v3_and_below_transactional_id
    ):
        error = ErrorCode.transactional_id_authorization_failed
        return add_partitions_to_txn.added(dict.fromkeys(partitions, error))
    writable = permissions.topics(Operation.WRITE, (partition.topic for partition in partitions))
    if all(partition.topic in writable for partition in partitions):
        return await handle(request, context)
    resolver = context.broker.resolver
    errors = {}
    for partition in partitions:
        if partition.topic not in writable:
            errors[partition] = ErrorCode.topic_authorization_failed
        elif not resolver.is_writable(partition):
            errors[partition] = ErrorCode.unknown_topic_or_partition
        else:
            errors[partition] = ErrorCode.operation_not_attempted
    return add_partitions_to_txn.added(errors)


async def add_offsets_to_txn_rule(
    request: AddOffsetsToTxnRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[AddOffsetsToTxnRequest, AddOffsetsToTxnResponse],
) -> AddOffsetsToTxnResponse:
    """WRITE on the transactional id and READ on the group, or the request is refused."""
    error = _offsets_refusal(permissions, request)
    if error is None:
        return await handle(request, context)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)


class _OffsetsToTxn(Protocol):
    """A request of a transaction's producer about its consumer group's offsets."""

    @property
    def transactional_id(self) -> str: ...

    @property
    def group_id(self) -> str: ...


def _offsets_refusal(permissions: Permissions, request: _OffsetsToTxn) -> ErrorCode | None:
    """The error refusing a transaction's offsets of a group: WRITE on the transactional
    id first, then READ on the group."""
    if not permissions.allows_transactional_id(Operation.WRITE, request.transactional_id):
        return ErrorCode.transactional_id_authorization_failed
    if not permissions.allows_group(Operation.READ, request.group_id):
        return ErrorCode.group_authorization_failed
    return None


def _writes_transactional_id(permissions: Permissions, request: EndTxnRequest) -> bool:
    return permissions.allows_transactional_id(Operation.WRITE, request.transactional_id)


def _refused_end_txn(_request: EndTxnRequest, _context: RequestContext) -> EndTxnResponse:
    return EndTxnResponse(
        throttle_time_ms=0, error_code=ErrorCode.transactional_id_authorization_failed
    )


end_txn_rule = all_or_nothing(_writes_transactional_id, _refused_end_txn)


# WRITE on the transactional id and READ on the group, or every partition carries the
# refusal; then READ on each topic, or its partitions are TOPIC_AUTHORIZATION_FAILED. With
# nothing left to commit, the transaction is not asked.
txn_offset_commit_rule = item_by_item(
    Listing(TxnOffsetCommitRequest, "topics", TxnOffsetCommitResponse, "topics"),
    whole_first(_offsets_refusal, topics_need(Operation.READ)),
    partition_by_partition(TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition),
)
