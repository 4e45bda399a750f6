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
ACLS_DB = b"acls"  # acl_key -> one ACL binding (storage/meta/acl_store.py)
SCRAM_DB = b"scram_credentials"  # scram_key -> salted SCRAM credential (meta/scram_store.py)

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT8 = struct.Struct(">b")
NAME_TERMINATOR = b"\x00"  # topic names never contain NUL, so it ends the name
# LMDB's default limit on a key (mdb_env_get_maxkeysize): a longer key cannot be stored.
MAX_KEY_BYTES = 511
SCRAM_MAX_USER_BYTES = MAX_KEY_BYTES - len(NAME_TERMINATOR) - _INT8.size


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


def scram_key(user: str, mechanism: int) -> bytes:
    """``user (UTF-8) NUL int8 mechanism``: the mechanism is the key's last byte and the NUL
    the one before, so a name holding NUL still splits one way, and a user's credentials
    sort together. Raises ValueError for a name over SCRAM_MAX_USER_BYTES."""
    name = user.encode("utf-8")
    if len(name) > SCRAM_MAX_USER_BYTES:
        raise ValueError(f"a user name is at most {SCRAM_MAX_USER_BYTES} bytes of UTF-8")
    return name + NAME_TERMINATOR + _INT8.pack(mechanism)


def split_scram_key(key: bytes) -> tuple[str, int]:
    """Inverse of ``scram_key``: (user, mechanism)."""
    (mechanism,) = _INT8.unpack_from(key, len(key) - _INT8.size)
    return key[: -len(NAME_TERMINATOR) - _INT8.size].decode("utf-8"), mechanism


def topic_prefix(topic: str) -> bytes:
    return topic_key(topic) + NAME_TERMINATOR


def split_topic(key: bytes) -> str:
    """The topic a ``topic_prefix`` or any key starting with one (``partition_key``...) is of."""
    return bytes(key).partition(NAME_TERMINATOR)[0].decode("utf-8")


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


# The full-data view (kshim/storage/views/full_view_store.py) keeps its own LMDB environment.
FULL_RECORDS_DB = b"full_records"  # full_record_key -> one-record v2 batch bytes
FULL_KEYS_DB = b"full_keys"  # full_key_key -> int64 offset of the key's live record
FULL_TOMBSTONES_DB = b"full_tombstones"  # full_record_key -> int64 expiry ms, key digest
# partition_key -> int64 next offset of T to apply; full_start_key -> int64 view start offset;
# full_source_key -> the 16-byte id of the topic the view was built from (kshim gateway's)
FULL_APPLIED_DB = b"full_applied"
FULL_START_SUFFIX = b"start"
FULL_SOURCE_SUFFIX = b"source"


def full_record_key(topic_partition: TopicPartition, offset: int) -> bytes:
    """``topic NUL int32 partition int64 offset``: a partition's records in offset order."""
    return partition_key(topic_partition) + _INT64.pack(offset)


def split_full_record_key(key: bytes) -> int:
    """The offset of a ``full_record_key``."""
    return decode_int64(key[-_INT64.size :])


def split_full_record_partition(key: bytes) -> TopicPartition:
    """The partition of a ``full_record_key``."""
    return split_partition_key(key[: -_INT64.size])


def full_start_key(topic_partition: TopicPartition) -> bytes:
    """``topic NUL int32 partition "start"``: the view's start offset, in FULL_APPLIED_DB
    beside the applied position under the partition's prefix, so that resetting or
    deleting the partition's view removes it too."""
    return partition_key(topic_partition) + FULL_START_SUFFIX


def full_source_key(topic_partition: TopicPartition) -> bytes:
    """``topic NUL int32 partition "source"``: the id of the topic the view was built from,
    beside its start offset, and removed with it."""
    return partition_key(topic_partition) + FULL_SOURCE_SUFFIX


def full_key_key(topic_partition: TopicPartition, key_digest: bytes) -> bytes:
    """``topic NUL int32 partition digest``: record keys are hashed to a fixed width
    because LMDB keys are limited to 511 bytes and Kafka keys are not."""
    return partition_key(topic_partition) + key_digest


# Delayed delivery (kshim/storage/schedule/delay_store.py) keeps its own LMDB environment.
# Their values' layouts are in kshim/storage/schedule/delay_records.py.
DELAY_STATE_DB = b"delay_state"  # DELAY_*_KEY below -> next seq, next topic id, the turn
DELAY_BUCKETS_DB = b"delay_buckets"  # delay_bucket_key -> the bucket's committed state
DELAY_POSITIONS_DB = b"delay_positions"  # partition_key of T.delay -> int64 next offset read
DELAY_TOPICS_DB = b"delay_topics"  # topic_key -> int32 id in bucket entries
DELAY_CANCELS_DB = b"delay_cancels"  # delay_cancel_key -> int64 seq cancelled below
DELAY_COUNTS_DB = b"delay_counts"  # topic_prefix of T -> int64 pending records
DELAY_LATENESS_DB = b"delay_lateness"  # topic_prefix of T -> int64 counts per lateness bucket
# An older kshim's schedule: every pending record in one table keyed by due time (refused).
DELAY_OLD_PENDING_DB = b"delay_pending"
# DELAY_STATE_DB's keys: the next seq, the next topic id, the delivery under way.
DELAY_SEQ_KEY = b"seq"
DELAY_NEXT_TOPIC_ID_KEY = b"topic_id"
DELAY_TURN_KEY = b"turn"
_DELAY_BUCKET = struct.Struct(">qq")  # width, start


def delay_bucket_key(width_ms: int, start_ms: int) -> bytes:
    """``int64 width, int64 start``: buckets sort by width, then by start."""
    return _DELAY_BUCKET.pack(width_ms, start_ms)


def split_delay_bucket_key(key: bytes) -> tuple[int, int]:
    """Inverse of ``delay_bucket_key``: (width ms, start ms)."""
    width, start = _DELAY_BUCKET.unpack(key)
    return width, start


def delay_cancel_key(topic_id: int, record_key: bytes) -> bytes:
    """``int32 topic id, key_digest``: a topic's cancellations sort together."""
    return _INT32.pack(topic_id) + key_digest(record_key)
