"""What the transaction coordinator's methods take and answer, beyond an ErrorCode.

Plain values: handlers turn them into typed responses, tests compare them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kshim.broker.transactions.fencing import NO_EPOCH, NO_PRODUCER
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import TransactionRecord


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """InitProducerId's answer: the producer's id and epoch, or an error and neither."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER
    producer_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionalOffset:
    """One TxnOffsetCommit offset, held until the transaction ends."""

    topic_partition: TopicPartition
    offset: int
    leader_epoch: int
    metadata: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id as DescribeTransactions and ListTransactions show it."""

    transactional_id: str
    state: str  # Kafka's TransactionState name: "Empty", "Ongoing", ...
    timeout_ms: int
    started_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]

    @classmethod
    def of(cls, record: TransactionRecord) -> TransactionDescription:
        return cls(
            transactional_id=record.transactional_id,
            state=record.state,
            timeout_ms=record.timeout_ms,
            started_ms=record.started_ms,
            producer_id=record.producer_id,
            producer_epoch=record.producer_epoch,
            partitions=tuple(TopicPartition(topic, index) for topic, index in record.partitions),
        )
