"""What the transaction coordinator knows of each transactional id, and the questions
handlers ask of it without changing it (coordinator.py changes it)."""

from __future__ import annotations

from collections.abc import Collection

from kshim.broker.transactions import transaction_states as states
from kshim.broker.transactions.answers import TransactionDescription
from kshim.broker.transactions.fencing import check_transactional_batch
from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import BatchHeader
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import TransactionRecord


class TransactionRecords:
    def __init__(self) -> None:
        # Read by the reviewer; handlers ask the methods below.
        self.records: dict[str, TransactionRecord] = {}

    def describe(self, transactional_id: str) -> TransactionDescription | None:
        """DescribeTransactions (handleDescribeTransactions): None for an unknown id."""
        record = self.records.get(transactional_id)
        return None if record is None else TransactionDescription.of(record)

    def list_transactions(
        self, wanted_states: Collection[str], producer_ids: Collection[int]
    ) -> list[TransactionDescription]:
        """ListTransactions (handleListTransactions): every transactional id in one of
        ``wanted_states`` with one of ``producer_ids`` (an empty filter passes all)."""
        return [
            TransactionDescription.of(record)
            for record in self.records.values()
            if (not wanted_states or record.state in wanted_states)
            and (not producer_ids or record.producer_id in producer_ids)
        ]

    def check_produce(
        self, transactional_id: str | None, header: BatchHeader, topic_partition: TopicPartition
    ) -> ErrorCode:
        """Validates a transactional batch against its transaction (TV1 rules)."""
        record = None if transactional_id is None else self.records.get(transactional_id)
        return check_transactional_batch(record, header, topic_partition)

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group whose offsets an open transaction holds (TxnOffsetCommit)."""
        return {
            TopicPartition(topic, partition)
            for record in self.records.values()
            if record.state not in states.COMPLETED
            for group, topic, partition, *_ in record.pending_offsets
            if group == group_id
        }
