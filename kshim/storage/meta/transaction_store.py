"""Transaction coordinator state and the aborted-transaction index, durable in LMDB.

Kafka keeps these in ``__transaction_state`` and per-segment ``.txnindex``
files. Here each transaction's record is one JSON value keyed by its
transactional id, and each partition's aborted transactions are keyed by the
offset of their ABORT marker, so a fetch finds the ones overlapping its range
with one cursor walk. Every write commits with fsync before it returns.
Methods block: call them off the event loop.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass, field

from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_ranges import delete_between, delete_prefixed
from kshim.storage.meta.lmdb_types import Environment, Transaction

_ABORTED_VALUE = struct.Struct(">qq")


# A TxnOffsetCommit offset (JSON keeps it as a list): group, topic, partition, offset,
# leader epoch, metadata.
PendingOffset = tuple[str, str, int, int, int, str]


@dataclass(slots=True)
class TransactionRecord:
    """What the coordinator knows of one transactional id (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str
    partitions: list[tuple[str, int]] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    started_ms: int = -1
    updated_ms: int = -1
    reviews: int = 0
    next_review_ms: int = -1
    # TxnOffsetCommit offsets awaiting the outcome; applied to the group on commit,
    # dropped on abort.
    pending_offsets: list[PendingOffset] = field(default_factory=list)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> TransactionRecord:
        body = json.loads(data)
        body["partitions"] = [tuple(partition) for partition in body["partitions"]]
        body["pending_offsets"] = [tuple(pending) for pending in body["pending_offsets"]]
        return cls(**body)


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


class TransactionStore:
    def __init__(self, environment: Environment) -> None:
        self._env = environment
        self._transactions = environment.open_db(keys.TRANSACTIONS_DB)
        self._aborted = environment.open_db(keys.ABORTED_DB)

    def load(self) -> dict[str, TransactionRecord]:
        with self._env.begin(db=self._transactions) as txn:
            return {key.decode(): TransactionRecord.from_json(value) for key, value in txn.cursor()}

    def put(self, record: TransactionRecord) -> None:
        with self._env.begin(db=self._transactions, write=True) as txn:
            txn.put(record.transactional_id.encode(), record.to_json())

    def delete(self, transactional_id: str) -> None:
        with self._env.begin(db=self._transactions, write=True) as txn:
            txn.delete(transactional_id.encode())

    def add_aborted(self, topic_partition: TopicPartition, aborted: AbortedTransaction) -> None:
        with self._env.begin(db=self._aborted, write=True) as txn:
            value = _ABORTED_VALUE.pack(aborted.producer_id, aborted.first_offset)
            txn.put(keys.aborted_key(topic_partition, aborted.last_offset), value)

    def aborted(self, topic_partition: TopicPartition) -> list[AbortedTransaction]:
        """Every aborted transaction of the partition, by marker offset."""
        prefix = keys.aborted_prefix(topic_partition)
        found = []
        with self._env.begin(db=self._aborted) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if not key.startswith(prefix) or len(key) != len(prefix) + 8:
                        break
                    producer_id, first_offset = _ABORTED_VALUE.unpack(value)
                    last_offset = keys.decode_int64(key[len(prefix) :])
                    found.append(AbortedTransaction(producer_id, first_offset, last_offset))
        return found

    def forget_topic(self, txn: Transaction, topic: str) -> None:
        """Within ``txn``: drops every aborted entry of the topic's partitions (the topic
        is being deleted; one recreated under its name starts with none)."""
        delete_prefixed(txn.cursor(db=self._aborted), keys.topic_prefix(topic))

    def forget_below(
        self, txn: Transaction, topic_partition: TopicPartition, log_start: int
    ) -> None:
        """Within ``txn``: drops the partition's aborted entries whose ABORT marker lies
        below ``log_start`` (retention or DeleteRecords removed their records)."""
        start = keys.aborted_prefix(topic_partition)
        stop = keys.aborted_key(topic_partition, log_start)
        delete_between(txn.cursor(db=self._aborted), start, stop)
