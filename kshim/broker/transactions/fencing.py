"""Fencing: which producer instance may act for a transactional id, and write to it.

Every InitProducerId for a transactional id bumps its producer epoch, so a request still
carrying an older epoch comes from an instance a newer one replaced (a zombie), and is
refused (KIP-98). KIP-588 gave that refusal its own code, PRODUCER_FENCED; request
versions before it answer INVALID_PRODUCER_EPOCH, as Kafka's TransactionCoordinator does.
"""

from __future__ import annotations

from kshim.broker.transactions.transaction_states import TransactionState as State
from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import BatchHeader
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import TransactionRecord

MAX_EPOCH = 32767
NO_PRODUCER = -1
NO_EPOCH = -1


def check_fencing(
    record: TransactionRecord | None, producer_id: int, epoch: int, *, fenced_code: bool
) -> ErrorCode:
    """The error for a request from (``producer_id``, ``epoch``) about ``record``, or none.

    ``fenced_code`` False: the request version predates PRODUCER_FENCED (KIP-588), so an
    older epoch is answered INVALID_PRODUCER_EPOCH.
    """
    if record is None or record.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if epoch < record.producer_epoch:
        return ErrorCode.producer_fenced if fenced_code else ErrorCode.invalid_producer_epoch
    if epoch > record.producer_epoch:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode.none


def check_transactional_batch(
    record: TransactionRecord | None, header: BatchHeader, topic_partition: TopicPartition
) -> ErrorCode:
    """The error for a transactional batch Produce was sent for ``record``'s transactional
    id (None: unknown, or no id sent), or none: the batch must come from the id's producer,
    not fenced, for a partition AddPartitionsToTxn added to its open transaction (the
    transaction protocol's first version, KIP-98)."""
    if record is None or record.producer_id != header.producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if header.producer_epoch < record.producer_epoch:
        return ErrorCode.invalid_producer_epoch
    partition = (topic_partition.topic, topic_partition.partition)
    if record.state != State.ONGOING or partition not in record.partitions:
        return ErrorCode.invalid_txn_state
    return ErrorCode.none
