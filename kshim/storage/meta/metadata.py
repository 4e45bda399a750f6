"""Durable broker metadata in LMDB: topics, their configs, log start offsets, where the log
cleaner stopped, counters.

Each write is its own LMDB transaction, committed with fsync before it
returns, so a created topic or a DeleteRecords survives a crash once
acknowledged. Methods block: call them off the event loop where latency matters.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.acl_store import AclStore
from kshim.storage.meta.committed_offsets import CommittedOffsetStore
from kshim.storage.meta.lmdb_ranges import delete_prefixed
from kshim.storage.meta.lmdb_types import Environment, open_environment, translate_lmdb_errors
from kshim.storage.meta.scram_store import METADATA_MAX_DATABASES, ScramStore
from kshim.storage.meta.transaction_store import TransactionStore

MAP_SIZE_BYTES = 1 << 32


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: bytes  # 16-byte UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # topic-level overrides only

    def to_json(self) -> bytes:
        body = {
            "topic_id": self.topic_id.hex(),
            "partitions": self.partitions,
            "configs": self.configs,
        }
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, name: str, data: bytes) -> TopicRecord:
        body = json.loads(data)
        return cls(name, bytes.fromhex(body["topic_id"]), body["partitions"], body["configs"])


class MetadataStore:
    @translate_lmdb_errors
    def __init__(self, directory: str) -> None:
        """Opens (creating if need be) the store in ``directory``; raises LmdbFailed or
        OSError when it cannot."""
        os.makedirs(directory, exist_ok=True)
        self._env: Environment = open_environment(
            directory, max_dbs=METADATA_MAX_DATABASES, map_size=MAP_SIZE_BYTES, sync=True
        )
        self._topics = self._env.open_db(keys.TOPICS_DB)
        self._log_starts = self._env.open_db(keys.LOG_STARTS_DB)
        self._cleaner_checkpoints = self._env.open_db(keys.CLEANER_CHECKPOINTS_DB)
        self._counters = self._env.open_db(keys.COUNTERS_DB)
        self.committed_offsets = CommittedOffsetStore(self._env)
        self.transactions = TransactionStore(self._env)
        self.acls = AclStore(self._env)
        self.scram = ScramStore(self._env)

    def topics(self) -> dict[str, TopicRecord]:
        """Returns every stored topic by name."""
        with self._env.begin(db=self._topics) as txn:
            return {
                key.decode(): TopicRecord.from_json(key.decode(), value)
                for key, value in txn.cursor()
            }

    def put_topic(self, record: TopicRecord) -> None:
        with self._env.begin(db=self._topics, write=True) as txn:
            txn.put(keys.topic_key(record.name), record.to_json())

    def delete_topic(self, name: str) -> None:
        """Removes the topic and every per-partition entry it had (log starts, cleaner
        checkpoints, aborted transactions), in one transaction."""
        with self._env.begin(write=True) as txn:
            txn.delete(keys.topic_key(name), db=self._topics)
            delete_prefixed(txn.cursor(db=self._log_starts), keys.topic_prefix(name))
            delete_prefixed(txn.cursor(db=self._cleaner_checkpoints), keys.topic_prefix(name))
            self.transactions.forget_topic(txn, name)

    def log_start_offset(self, topic_partition: TopicPartition) -> int:
        with self._env.begin(db=self._log_starts) as txn:
            value = txn.get(keys.partition_key(topic_partition))
        return 0 if value is None else keys.decode_int64(value)

    def log_start_offsets(self) -> dict[TopicPartition, int]:
        """Every partition's log start offset that is not 0, in one read."""
        with self._env.begin(db=self._log_starts) as txn:
            return {
                keys.split_partition_key(key): keys.decode_int64(value)
                for key, value in txn.cursor()
            }

    def set_log_start_offset(self, topic_partition: TopicPartition, offset: int) -> None:
        """Moves the log start and, in the same transaction, forgets the aborted
        transactions wholly below it."""
        with self._env.begin(write=True) as txn:
            txn.put(
                keys.partition_key(topic_partition), keys.encode_int64(offset), db=self._log_starts
            )
            self.transactions.forget_below(txn, topic_partition, offset)

    def cleaner_checkpoint(self, topic_partition: TopicPartition) -> int | None:
        """The partition's first dirty offset, where the log cleaner's last pass stopped
        (Kafka's cleaner-offset-checkpoint), or None before any pass."""
        with self._env.begin(db=self._cleaner_checkpoints) as txn:
            value = txn.get(keys.partition_key(topic_partition))
        return None if value is None else keys.decode_int64(value)

    def set_cleaner_checkpoint(self, topic_partition: TopicPartition, offset: int) -> None:
        with self._env.begin(db=self._cleaner_checkpoints, write=True) as txn:
            txn.put(keys.partition_key(topic_partition), keys.encode_int64(offset))

    def allocate_producer_id(self) -> int:
        """Returns a producer id never handed out before, even across restarts."""
        with self._env.begin(db=self._counters, write=True) as txn:
            value = txn.get(keys.PRODUCER_IDS_COUNTER)
            producer_id = 0 if value is None else keys.decode_int64(value)
            txn.put(keys.PRODUCER_IDS_COUNTER, keys.encode_int64(producer_id + 1))
        return producer_id

    def close(self) -> None:
        self._env.close()
