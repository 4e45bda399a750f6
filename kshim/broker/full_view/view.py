"""The view's in-memory side: its store, applied positions, and the applier's wake-ups.

The applier sleeps on one asyncio.Event per source partition, set by the
partition log's high-watermark listener, so it never polls. Applied positions
are cached here (the store is the truth, read once per partition) so that
Fetch and ListOffsets on ``T.full`` never wait on LMDB for the high watermark.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kshim.broker.full_view.worker import ChunkApplier
from kshim.storage.full_view_store import FullViewStore
from kshim.storage.interface import TopicPartition


class FullView:
    def __init__(self, store: FullViewStore, applier: ChunkApplier) -> None:
        self.store = store
        self.applier = applier
        self.wake_up = asyncio.Event()  # set when any source partition has something new
        self.pending: set[TopicPartition] = set()
        self.lock = asyncio.Lock()  # serialises applying a chunk with deleting a view
        self._positions: dict[TopicPartition, int] = {}
        self._starts: dict[TopicPartition, int] = {}  # the view's log start offsets

    def notify(self, topic_partition: TopicPartition) -> None:
        """The source partition's high watermark advanced (log listener)."""
        self.pending.add(topic_partition)
        self.wake_up.set()

    async def applied_position(self, topic_partition: TopicPartition) -> int:
        """The view's high watermark: the next source offset not yet applied."""
        return await _cached(self._positions, self.store.applied_position, topic_partition)

    def set_position(self, topic_partition: TopicPartition, position: int) -> None:
        """Records an applied position; never moves back (two appliers may race, and the
        store skips what was applied already, so the later position is the true one)."""
        current = self._positions.get(topic_partition, position)
        self._positions[topic_partition] = max(current, position)

    async def start_offset(self, topic_partition: TopicPartition) -> int:
        """The view's log start: where it was built from (read from the store once)."""
        return await _cached(self._starts, self.store.start_offset, topic_partition)

    def reset_position(self, topic_partition: TopicPartition, position: int) -> None:
        """A partition's view was dropped for a rebuild from ``position``, which is both
        its applied position and its log start now."""
        self._positions[topic_partition] = position
        self._starts[topic_partition] = position

    async def forget_topic(self, topic: str) -> None:
        """Deletes the view data of a deleted topic."""
        async with self.lock:
            for cache in (self._positions, self._starts):
                for topic_partition in [tp for tp in cache if tp.topic == topic]:
                    del cache[topic_partition]
            self.pending = {tp for tp in self.pending if tp.topic != topic}
            await asyncio.to_thread(self.store.delete_topic, topic)


async def _cached(
    cache: dict[TopicPartition, int],
    load: Callable[[TopicPartition], int],
    topic_partition: TopicPartition,
) -> int:
    """The cached value, read from the store (in a worker thread) the first time. A value
    set while the read ran wins: it is newer than what the store held."""
    if topic_partition not in cache:
        value = await asyncio.to_thread(load, topic_partition)
        cache.setdefault(topic_partition, value)
    return cache[topic_partition]
