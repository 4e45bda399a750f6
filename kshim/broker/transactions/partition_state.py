"""One partition's view of transactions: open ones (for the last stable offset) and aborted ones.

The last stable offset is the first offset of the oldest open transaction
(or the high watermark): read_committed consumers stop there. Aborted
transactions are listed in fetch responses so clients skip their batches
(docs/protocol-notes.md §5.2). Open transactions are rebuilt on restart from the
batch headers in the log (transactional data opens, a control batch closes);
the aborted list comes from LMDB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kshim.protocol.record_batch import BatchHeader
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import AbortedTransaction


@dataclass(slots=True)
class OpenTransaction:
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class PartitionTransactions:
    open: dict[int, OpenTransaction] = field(default_factory=dict)  # by producer id
    aborted: list[AbortedTransaction] = field(default_factory=list)  # by marker offset

    def on_append(self, header: BatchHeader, base_offset: int) -> None:
        """Tracks a batch just appended: transactional data opens or extends a transaction."""
        if not header.is_transactional:
            return
        last_offset = base_offset + header.last_offset_delta
        if header.is_control:
            self.open.pop(header.producer_id, None)
            return
        current = self.open.get(header.producer_id)
        if current is None:
            self.open[header.producer_id] = OpenTransaction(base_offset, last_offset)
        else:
            current.last_offset = last_offset

    def recover(self, header: BatchHeader) -> None:
        self.on_append(header, header.base_offset)

    def transaction_start_offset(self, producer_id: int) -> int:
        """The first offset of the producer's open transaction here, or -1 (DescribeProducers'
        current_txn_start_offset)."""
        open_transaction = self.open.get(producer_id)
        return -1 if open_transaction is None else open_transaction.first_offset

    def last_stable_offset(self, high_watermark: int) -> int:
        first_open = min((txn.first_offset for txn in self.open.values()), default=high_watermark)
        return min(first_open, high_watermark)

    def record_abort(self, aborted: AbortedTransaction) -> None:
        self.aborted.append(aborted)

    def aborted_in_range(self, fetch_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [fetch, upper)."""
        return [
            (aborted.producer_id, aborted.first_offset)
            for aborted in self.aborted
            if aborted.last_offset >= fetch_offset and aborted.first_offset < upper_offset
        ]

    def forget_below(self, log_start_offset: int) -> None:
        """Drops aborted entries wholly below the log start (retention removed their data)."""
        self.aborted = [entry for entry in self.aborted if entry.last_offset >= log_start_offset]


def is_aborted(header: BatchHeader, aborted: Sequence[AbortedTransaction]) -> bool:
    """Whether a read_committed reader skips the batch: an aborted entry covers its
    producer's transactional batches from its first offset up to its ABORT marker."""
    if not header.is_transactional:
        return False
    return any(
        entry.producer_id == header.producer_id
        and entry.first_offset <= header.base_offset < entry.last_offset
        for entry in aborted
    )


class PartitionStates:
    """Every partition's transactions, created on first use with the aborted ones LMDB
    holds (``aborted``)."""

    def __init__(self, aborted: Callable[[TopicPartition], list[AbortedTransaction]]) -> None:
        self._aborted = aborted
        self._states: dict[TopicPartition, PartitionTransactions] = {}

    def get(self, topic_partition: TopicPartition) -> PartitionTransactions:
        state = self._states.get(topic_partition)
        if state is None:
            state = PartitionTransactions(aborted=self._aborted(topic_partition))
            self._states[topic_partition] = state
        return state

    def forget_below(self, topic_partition: TopicPartition, log_start: int) -> None:
        """Drops the aborted transactions retention or DeleteRecords left without records
        (LMDB forgets them with the new log start: MetadataStore.set_log_start_offset)."""
        state = self._states.get(topic_partition)
        if state is not None:
            state.forget_below(log_start)

    def forget_topic(self, topic: str) -> None:
        """Drops a deleted topic's partition states (LMDB forgets them with the topic)."""
        for topic_partition in [tp for tp in self._states if tp.topic == topic]:
            del self._states[topic_partition]

    def recovery_callback(self, topic_partition: TopicPartition) -> Callable[[BatchHeader], None]:
        """Replays a partition's batch headers at start-up (open transactions)."""
        self._states.pop(topic_partition, None)
        return self.get(topic_partition).recover
