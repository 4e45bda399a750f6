"""Consumer groups' committed offsets, durable in LMDB (Kafka keeps them in __consumer_offsets).

Key: ``group NUL topic NUL int32 partition`` (``lmdb_keys.committed_offset_key``).
Value, big-endian::

    offset            int64   the next offset the group will consume
    leader_epoch      int32   -1 when the client did not say (OffsetCommit < v6)
    commit_timestamp  int64   broker clock, ms, when the commit was acknowledged
    expire_timestamp  int64   -1, or commit time + retention_time (OffsetCommit v2-4)
    metadata          bytes   UTF-8 of the client's metadata string, to the end of the value

Every write is one LMDB transaction committed with fsync before it returns
(the environment is opened with ``sync=True``), so an acknowledged commit
survives kill -9. Methods block: call them off the event loop.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_ranges import delete_prefixed
from kshim.storage.meta.lmdb_types import Environment

_FIXED = struct.Struct(">qiqq")
NO_EXPIRY = -1


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = NO_EXPIRY

    def to_bytes(self) -> bytes:
        fixed = _FIXED.pack(
            self.offset, self.leader_epoch, self.commit_timestamp, self.expire_timestamp
        )
        return fixed + self.metadata.encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> CommittedOffset:
        offset, leader_epoch, committed, expires = _FIXED.unpack_from(data, 0)
        metadata = bytes(data[_FIXED.size :]).decode("utf-8", errors="replace")
        return cls(offset, leader_epoch, metadata, committed, expires)


GroupOffsets = dict[TopicPartition, CommittedOffset]


class CommittedOffsetStore:
    """Committed offsets inside the metadata store's LMDB environment."""

    def __init__(self, environment: Environment) -> None:
        self._env = environment
        self._db = environment.open_db(keys.COMMITTED_OFFSETS_DB)

    def load_all(self) -> dict[str, GroupOffsets]:
        """Returns every stored offset, by group id then partition."""
        result: dict[str, GroupOffsets] = {}
        with self._env.begin(db=self._db) as txn:
            for key, value in txn.cursor():
                group_id, topic_partition = keys.split_committed_offset_key(bytes(key))
                result.setdefault(group_id, {})[topic_partition] = CommittedOffset.from_bytes(
                    bytes(value)
                )
        return result

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        """Stores all ``offsets`` atomically, fsynced before returning."""
        with self._env.begin(db=self._db, write=True) as txn:
            for topic_partition, committed in offsets.items():
                txn.put(keys.committed_offset_key(group_id, topic_partition), committed.to_bytes())

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Removes the group's offsets of ``partitions`` in one transaction."""
        with self._env.begin(db=self._db, write=True) as txn:
            for topic_partition in partitions:
                txn.delete(keys.committed_offset_key(group_id, topic_partition))

    def delete_group(self, group_id: str) -> None:
        """Removes every offset the group committed."""
        prefix = keys.group_prefix(group_id)
        with self._env.begin(db=self._db, write=True) as txn:
            delete_prefixed(txn.cursor(), prefix)
