"""The full-data view's durable state in LMDB: live records, key index, tombstones.

Per partition of a source topic ``T`` it holds, in its own LMDB environment:

- every live record of ``T.full`` as a one-record v2 batch at its original offset;
- for each record key (hashed), the offset of the key's live record;
- the tombstones still kept, with the time (ms) after which they go;
- the applied position: the next offset of ``T`` the view has not applied yet, and the
  view's start offset when it was rebuilt from a log start above 0;
- for a view kshim gateway builds from a Kafka cluster, the id of the topic it was built
  from, so that a view kept on disk is resumed only on the same topic, never on one
  deleted and created again under its name (kshim/gateway/full/index.py).

``apply`` writes one chunk of changes and the new applied position in ONE
write transaction, so a crash leaves the view at a chunk boundary and a replay
of the same offsets finds them already applied (the VENUS rule table: delete of
an absent key is ignored, insert of a present key replaces it, the same offset
again changes nothing). Methods block on LMDB: call them from a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_ranges import delete_prefixed
from kshim.storage.meta.lmdb_types import Environment, Transaction, open_environment

MAP_SIZE_BYTES = 1 << 36
NOT_APPLIED = 0
TOMBSTONE_DIGEST_AT = 8  # a tombstone's value: int64 expiry (ms), then the key's digest


@dataclass(frozen=True, slots=True)
class ViewChange:
    """One keyed record of ``T`` to apply: ``expires_at`` is set for a tombstone."""

    offset: int
    key: bytes
    batch: bytes  # the record as a one-record v2 batch at ``offset``
    expires_at: int | None = None


@dataclass(frozen=True, slots=True)
class StoredRecord:
    offset: int
    batch: bytes


class FullViewStore:
    def __init__(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self._env: Environment = open_environment(
            directory, max_dbs=4, map_size=MAP_SIZE_BYTES, sync=True
        )
        self._records = self._env.open_db(keys.FULL_RECORDS_DB)
        self._keys = self._env.open_db(keys.FULL_KEYS_DB)
        self._tombstones = self._env.open_db(keys.FULL_TOMBSTONES_DB)
        self._applied = self._env.open_db(keys.FULL_APPLIED_DB)

    def applied_position(self, topic_partition: TopicPartition) -> int:
        """The next offset of the source partition the view has not applied."""
        with self._env.begin(db=self._applied) as txn:
            value = txn.get(keys.partition_key(topic_partition))
        return NOT_APPLIED if value is None else keys.decode_int64(value)

    def apply(
        self, topic_partition: TopicPartition, changes: Sequence[ViewChange], next_position: int
    ) -> None:
        """Applies ``changes`` (in offset order) and moves the applied position, atomically.

        Changes at offsets below the stored applied position were applied
        before (a replay after a crash) and are skipped.
        """
        with self._env.begin(write=True) as txn:
            applied = txn.get(keys.partition_key(topic_partition), db=self._applied)
            start = NOT_APPLIED if applied is None else keys.decode_int64(applied)
            for change in changes:
                if change.offset >= start:
                    self._apply_one(txn, topic_partition, change)
            if next_position > start:
                txn.put(
                    keys.partition_key(topic_partition),
                    keys.encode_int64(next_position),
                    db=self._applied,
                )

    def _apply_one(
        self, txn: Transaction, topic_partition: TopicPartition, change: ViewChange
    ) -> None:
        digest = keys.key_digest(change.key)
        index_key = keys.full_key_key(topic_partition, digest)
        previous = txn.get(index_key, db=self._keys)
        if previous is not None:
            old_key = keys.full_record_key(topic_partition, keys.decode_int64(previous))
            txn.delete(old_key, db=self._records)
            txn.delete(old_key, db=self._tombstones)
        record_key = keys.full_record_key(topic_partition, change.offset)
        txn.put(record_key, change.batch, db=self._records)
        txn.put(index_key, keys.encode_int64(change.offset), db=self._keys)
        if change.expires_at is not None:
            tombstone = keys.encode_int64(change.expires_at) + digest
            txn.put(record_key, tombstone, db=self._tombstones)

    def purge_tombstones(self, now_ms: int) -> list[TopicPartition]:
        """Removes every tombstone whose expiry has passed; returns the partitions changed."""
        changed: set[TopicPartition] = set()
        with self._env.begin(write=True) as txn:
            expired = [
                record_key
                for record_key, expiry in txn.cursor(db=self._tombstones)
                if keys.decode_int64(expiry[:TOMBSTONE_DIGEST_AT]) <= now_ms
            ]
            for record_key in expired:
                self._drop_tombstone(txn, record_key, changed)
        return sorted(changed)

    def _drop_tombstone(
        self, txn: Transaction, record_key: bytes, changed: set[TopicPartition]
    ) -> None:
        value = txn.get(record_key, db=self._tombstones)
        assert value is not None  # listed from this table in this transaction
        txn.delete(record_key, db=self._tombstones)
        txn.delete(record_key, db=self._records)
        topic_partition = keys.split_full_record_partition(record_key)
        index_key = keys.full_key_key(topic_partition, value[TOMBSTONE_DIGEST_AT:])
        indexed = txn.get(index_key, db=self._keys)
        offset = keys.split_full_record_key(record_key)
        if indexed is not None and keys.decode_int64(indexed) == offset:
            txn.delete(index_key, db=self._keys)
        changed.add(topic_partition)

    def read(
        self, topic_partition: TopicPartition, from_offset: int, upper_offset: int, max_bytes: int
    ) -> tuple[list[StoredRecord], int | None]:
        """Live records with ``from_offset <= offset < upper_offset`` in offset order, up to
        ``max_bytes`` (at least one); also the offset of the next live record after them
        below ``upper_offset`` (None when there is none)."""
        found: list[StoredRecord] = []
        size = 0
        for offset, batch in self._scan(topic_partition, from_offset, upper_offset):
            if found and size + len(batch) > max_bytes:
                return found, offset
            found.append(StoredRecord(offset, batch))
            size += len(batch)
        return found, None

    def live_records(self, topic_partition: TopicPartition) -> list[StoredRecord]:
        """Every live record of the partition (for timestamp lookups and tests)."""
        return [StoredRecord(offset, batch) for offset, batch in self._scan(topic_partition, 0)]

    def _scan(
        self, topic_partition: TopicPartition, from_offset: int, upper_offset: int = 2**63 - 1
    ) -> Iterator[tuple[int, bytes]]:
        prefix = keys.partition_key(topic_partition)
        with self._env.begin(db=self._records) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(keys.full_record_key(topic_partition, max(from_offset, 0))):
                return
            for record_key, batch in cursor:
                if not record_key.startswith(prefix):
                    return
                offset = keys.split_full_record_key(record_key)
                if offset >= upper_offset:
                    return
                yield offset, bytes(batch)

    def delete_topic(self, topic: str) -> None:
        """Removes every record, key, tombstone and position of the topic's view."""
        self._delete_prefix(keys.topic_prefix(topic))

    def reset_partition(self, topic_partition: TopicPartition, start: int) -> None:
        """Removes one partition's view data, so that it is rebuilt from ``start`` (the
        log's start), which becomes the view's start offset."""
        self._delete_prefix(keys.partition_key(topic_partition))
        with self._env.begin(write=True, db=self._applied) as txn:
            txn.put(keys.full_start_key(topic_partition), keys.encode_int64(start))

    def viewed_topics(self) -> set[str]:
        """The topics whose view holds anything (an applied position or a start offset)."""
        with self._env.begin(db=self._applied) as txn:
            return {keys.split_topic(key) for key in txn.cursor().iternext(keys=True, values=False)}

    def start_offset(self, topic_partition: TopicPartition) -> int:
        """The offset the view was built from: 0, or the log start of its last rebuild."""
        with self._env.begin(db=self._applied) as txn:
            value = txn.get(keys.full_start_key(topic_partition))
        return 0 if value is None else keys.decode_int64(value)

    def source_id(self, topic_partition: TopicPartition) -> bytes | None:
        """The id of the topic the view was built from, if one was noted since its reset."""
        with self._env.begin(db=self._applied) as txn:
            value = txn.get(keys.full_source_key(topic_partition))
        return None if value is None else bytes(value)

    def note_source_id(self, topic_partition: TopicPartition, topic_id: bytes) -> None:
        """Notes the id of the topic the view is built from (a reset removes it)."""
        with self._env.begin(write=True, db=self._applied) as txn:
            txn.put(keys.full_source_key(topic_partition), topic_id)

    def _delete_prefix(self, prefix: bytes) -> None:
        with self._env.begin(write=True) as txn:
            for db in (self._records, self._keys, self._tombstones, self._applied):
                delete_prefixed(txn.cursor(db=db), prefix)

    def close(self) -> None:
        self._env.close()
