"""Committed offsets: an in-memory view over the durable LMDB store.

Reads (OffsetFetch) come from memory; every change is written to LMDB with
fsync in a worker thread first and applied to memory after, so a reader
never sees an offset that a crash could lose. Writes of one group are
serialised (a lock per group id ever written, kept for the process lifetime)
so the store and memory agree on which commit came last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping

from kshim.storage.interface import TopicPartition
from kshim.storage.meta.committed_offsets import CommittedOffset, CommittedOffsetStore, GroupOffsets


class OffsetManager:
    def __init__(self, store: CommittedOffsetStore) -> None:
        self._store = store
        self._offsets: dict[str, GroupOffsets] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def load(self) -> None:
        """Reads every stored offset into memory (at broker start)."""
        self._offsets = await asyncio.to_thread(self._store.load_all)

    def group_ids(self) -> list[str]:
        """Groups that hold at least one committed offset."""
        return list(self._offsets)

    def committed(self, group_id: str) -> Mapping[TopicPartition, CommittedOffset]:
        return self._offsets.get(group_id, {})

    async def commit(
        self, group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]
    ) -> None:
        """Makes ``offsets`` durable (one fsynced transaction), then visible."""
        if not offsets:
            return
        async with self._lock(group_id):
            await asyncio.to_thread(self._store.commit, group_id, offsets)
            self._offsets.setdefault(group_id, {}).update(offsets)

    async def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Forgets the group's offsets of ``partitions``, durably."""
        doomed = [tp for tp in partitions if tp in self._offsets.get(group_id, {})]
        if not doomed:
            return
        async with self._lock(group_id):
            await asyncio.to_thread(self._store.delete, group_id, doomed)
            stored = self._offsets.get(group_id, {})
            for topic_partition in doomed:
                stored.pop(topic_partition, None)
            if not stored:
                self._offsets.pop(group_id, None)

    async def delete_group(self, group_id: str) -> None:
        """Forgets every offset of the group, durably."""
        async with self._lock(group_id):
            await asyncio.to_thread(self._store.delete_group, group_id)
            self._offsets.pop(group_id, None)

    def expired(
        self, group_id: str, now_ms: int, retention_ms: int, empty_since_ms: int
    ) -> list[TopicPartition]:
        """Offsets of an empty group that outlived ``offsets.retention.minutes``.

        As Kafka (KIP-211): the retention period counts from the later of the
        commit and the moment the group became empty; an explicit
        ``retention_time`` (OffsetCommit v2-4) sets the expiry instead.
        """
        return [
            topic_partition
            for topic_partition, committed in self.committed(group_id).items()
            if _is_expired(committed, now_ms, retention_ms, empty_since_ms)
        ]

    def partitions_where(
        self, group_id: str, predicate: Callable[[TopicPartition], bool]
    ) -> list[TopicPartition]:
        return [tp for tp in self.committed(group_id) if predicate(tp)]

    def _lock(self, group_id: str) -> asyncio.Lock:
        return self._locks.setdefault(group_id, asyncio.Lock())


def _is_expired(
    committed: CommittedOffset, now_ms: int, retention_ms: int, empty_since_ms: int
) -> bool:
    if committed.expire_timestamp >= 0:
        return now_ms >= committed.expire_timestamp
    return now_ms - max(committed.commit_timestamp, empty_since_ms) >= retention_ms
