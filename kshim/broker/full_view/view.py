"""The view's in-memory side: which views are kept, their store, applied positions, and
the applier's wake-ups.

A view costs nothing until it is used. Every topic ``T`` whose ``kshim.full.view`` is on
has a readable ``T.full``, but only views that are kept get applied (and hold back
retention): those set on explicitly (``kshim.full.view=true`` on the topic, or in the
broker's own configuration) and those read once. The first read of any other view
builds it from the log start while the reader waits (``ensure_kept``); the view then
holds the latest record of every key still in the log: keys whose every record
retention removed before that first read are not in it (the same as the view of a
topic whose history is gone, see applier.py's rebuild).

The applier sleeps on one asyncio.Event per source partition, set by the
partition log's high-watermark listener, so it never polls. Applied positions
are cached here (the store is the truth, read once per partition) so that
Fetch and ListOffsets on ``T.full`` never wait on LMDB for the high watermark.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kshim.broker.full_view import naming
from kshim.broker.full_view.worker import ChunkApplier
from kshim.broker.topics import Topic
from kshim.storage.interface import TopicPartition
from kshim.storage.views.full_view_store import FullViewStore

log = logging.getLogger(__name__)


class FullView:
    def __init__(self, store: FullViewStore, applier: ChunkApplier, eager: bool) -> None:
        """``eager``: every view is kept from the start (``kshim.full.view=true`` set in
        the broker's configuration)."""
        self.store = store
        self.applier = applier
        self.eager = eager
        self.wake_up = asyncio.Event()  # set when any source partition has something new
        self.pending: set[TopicPartition] = set()
        self.lock = asyncio.Lock()  # serialises applying a chunk with deleting a view
        self._positions: dict[TopicPartition, int] = {}
        self._starts: dict[TopicPartition, int] = {}  # the view's log start offsets
        # When each partition's view last held every decided record (wall-clock ms): how
        # long a lagging view has been behind (the metrics).
        self.caught_up_ms: dict[TopicPartition, int] = {}
        self._read: set[str] = set()  # topics whose view was read (or holds data already)
        self._builds: dict[str, asyncio.Task[None]] = {}
        # Applies a topic's view up to its source's last stable offset (set by the broker).
        self.builder: Callable[[str], Awaitable[None]] | None = None

    async def load(self) -> None:
        """At start: views holding data from before are kept as they were."""
        self._read = await asyncio.to_thread(self.store.viewed_topics)

    def keeps(self, topic: Topic) -> bool:
        """Whether ``topic``'s view is kept current: it must see every append, and the
        log start may not pass what it has applied."""
        if not naming.has_view(topic):
            return False
        explicit = naming.VIEW_CONFIG in topic.record.configs
        return self.eager or explicit or topic.record.name in self._read

    async def ensure_kept(self, topic: str) -> None:
        """A read of ``topic``'s view: if nobody kept it so far, it is built now, from the
        log start up to the last stable offset, and every reader waits for that."""
        if topic not in self._read:
            self._read.add(topic)
            log.info("%s: first read of its full-data view; building it from the log start",
                     topic)  # fmt: skip
            if self.builder is not None:
                self._builds[topic] = asyncio.ensure_future(self._build(topic))
        build = self._builds.get(topic)
        if build is not None:
            await asyncio.shield(build)

    async def _build(self, topic: str) -> None:
        assert self.builder is not None
        try:
            await self.builder(topic)
        except Exception:
            # The background applier goes on from where the build stopped.
            log.exception("%s: building the full-data view failed", topic)
        finally:
            self._builds.pop(topic, None)

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
        self._read.discard(topic)
        async with self.lock:
            for cache in (self._positions, self._starts, self.caught_up_ms):
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
