"""Every LMDB key layout kshim uses, in one place.

Keys are big-endian and fixed-width after a variable-length name, so LMDB's
byte order is numeric order and a name's keys form one contiguous range.
"""

from __future__ import annotations

import hashlib
import struct

from kshim.storage.interface import TopicPartition

TOPICS_DB = b"topics"  # topic name -> TopicRecord JSON
LOG_STARTS_DB = b"log_starts"  # partition key -> int64 log start offset
# partition key -> int64 first dirty offset: where the log cleaner's last pass stopped
CLEANER_CHECKPOINTS_DB = b"cleaner_checkpoints"
COUNTERS_DB = b"counters"  # counter name -> int64
PRODUCER_IDS_COUNTER = b"next_producer_id"
TRANSACTIONS_DB = b"transactions"  # transactional id (UTF-8) -> TransactionRecord JSON
ABORTED_DB = b"aborted_transactions"  # aborted_key -> int64 producer id, int64 first offset
COMMITTED_OFFSETS_DB = b"committed_offsets"  # committed_offset_key -> CommittedOffset bytes
ACLS_DB = b"acls"  # acl_key -> one ACL binding (storage/acl_store.py)
SCRAM_DB = (
    b"scram_credentials"  # user, mechanism -> salted SCRAM credential (storage/scram_store.py)
)

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
NAME_TERMINATOR = b"\x00"  # topic names never contain NUL, so it ends the name


def topic_key(topic: str) -> bytes:
    return topic.encode("utf-8")


def partition_key(topic_partition: TopicPartition) -> bytes:
    """``topic NUL int32 partition``: all partitions of a topic sort together."""
    return (
        topic_key(topic_partition.topic) + NAME_TERMINATOR + _INT32.pack(topic_partition.partition)
    )


def split_partition_key(key: bytes) -> TopicPartition:
    """Inverse of ``partition_key``."""
    topic, _, partition = key.partition(NAME_TERMINATOR)
    return TopicPartition(topic.decode("utf-8"), _INT32.unpack(partition)[0])


def key_digest(key: bytes) -> bytes:
    """A record key hashed to a fixed width: LMDB keys are limited to 511 bytes and Kafka
    record keys are not (the full-data view's key index, the delay schedule's)."""
    return hashlib.sha256(key).digest()


def topic_prefix(topic: str) -> bytes:
    return topic_key(topic) + NAME_TERMINATOR


def encode_int64(value: int) -> bytes:
    return _INT64.pack(value)


def decode_int64(data: bytes) -> int:
    value: int = _INT64.unpack(data)[0]
    return value


def group_prefix(group_id: str) -> bytes:
    """``group NUL``: every committed offset of a group sorts together (no NUL in group ids)."""
    return group_id.encode("utf-8") + NAME_TERMINATOR


def committed_offset_key(group_id: str, topic_partition: TopicPartition) -> bytes:
    """``group NUL topic NUL int32 partition``."""
    return group_prefix(group_id) + partition_key(topic_partition)


def split_committed_offset_key(key: bytes) -> tuple[str, TopicPartition]:
    """Inverse of ``committed_offset_key``."""
    group, _, rest = key.partition(NAME_TERMINATOR)
    return group.decode("utf-8"), split_partition_key(rest)


def aborted_key(topic_partition: TopicPartition, last_offset: int) -> bytes:
    """``topic NUL int32 partition int64 marker offset``: a partition's aborted
    transactions sort by the offset of their ABORT marker."""
    return partition_key(topic_partition) + _INT64.pack(last_offset)


def aborted_prefix(topic_partition: TopicPartition) -> bytes:
    return partition_key(topic_partition)


# The full-data view (kshim/storage/full_view_store.py) keeps its own LMDB environment.
FULL_RECORDS_DB = b"full_records"  # full_record_key -> one-record v2 batch bytes
FULL_KEYS_DB = b"full_keys"  # full_key_key -> int64 offset of the key's live record
FULL_TOMBSTONES_DB = b"full_tombstones"  # full_record_key -> int64 expiry ms, key digest
FULL_APPLIED_DB = b"full_applied"  # partition_key -> int64 next offset of T to apply


def full_record_key(topic_partition: TopicPartition, offset: int) -> bytes:
    """``topic NUL int32 partition int64 offset``: a partition's records in offset order."""
    return partition_key(topic_partition) + _INT64.pack(offset)


def split_full_record_key(key: bytes) -> int:
    """The offset of a ``full_record_key``."""
    return decode_int64(key[-_INT64.size :])


def full_key_key(topic_partition: TopicPartition, key_digest: bytes) -> bytes:
    """``topic NUL int32 partition digest``: record keys are hashed to a fixed width
    because LMDB keys are limited to 511 bytes and Kafka keys are not."""
    return partition_key(topic_partition) + key_digest


# Delayed delivery (kshim/storage/delay_store.py) keeps its own LMDB environment.
DELAY_STATE_DB = b"delay_state"  # next seq, next topic id, the delivery under way
DELAY_BUCKETS_DB = b"delay_buckets"  # int64 width, int64 start -> the bucket's committed state
DELAY_POSITIONS_DB = b"delay_positions"  # partition_key of T.delay -> int64 next offset read
DELAY_TOPICS_DB = b"delay_topics"  # topic name -> int32 id in bucket entries
DELAY_CANCELS_DB = b"delay_cancels"  # int32 topic id, key_digest -> int64 seq cancelled below
DELAY_COUNTS_DB = b"delay_counts"  # topic_prefix of T -> int64 pending records
DELAY_LATENESS_DB = b"delay_lateness"  # topic_prefix of T -> int64 counts per lateness bucket
