"""The schedule's in-memory side: which ``T.delay`` partitions have something new, the
read positions (cached; the store is the truth), and the wake-up of the one task that
reads them into the schedule and delivers what is due (``runner.py``'s turns).

Nothing runs for a broker nobody delays anything on: the task sleeps on its event until
a ``T.delay`` partition is written, and the store's LMDB environment is created with
the first scheduled record. Event-loop thread only.
"""

from __future__ import annotations

import asyncio

from kshim.broker.delay.chunk_worker import ChunkWorker
from kshim.storage.interface import TopicPartition
from kshim.storage.schedule.delay_store import DelayStore

# Longest sleep between looks at the schedule: a wall-clock jump forward (NTP, a resumed
# VM) makes records due early by the clock, and they go out within this much of it.
MAX_SLEEP_S = 1.0


class DelaySchedule:
    def __init__(self, store: DelayStore, max_delay_ms: int) -> None:
        self.store = store
        self.max_delay_ms = max_delay_ms  # kshim.delay.max.ms, checked at produce
        self.wake_up = asyncio.Event()
        self.lock = asyncio.Lock()  # reading into the schedule waits while a delivery runs
        self._new: dict[TopicPartition, None] = {}  # T.delay partitions with new records
        self._positions: dict[TopicPartition, int] = {}
        self.chunk_worker = ChunkWorker()  # files large chunks of T.delay off this core

    def notify(self, delay_partition: TopicPartition) -> None:
        """A ``T.delay`` partition's high watermark moved (an append or a decided
        transaction): its new records are read into the schedule."""
        self._new[delay_partition] = None
        self.wake_up.set()

    def take_all_new(self) -> list[TopicPartition]:
        """The partitions notified since the last call, each once."""
        taken = list(self._new)
        self._new.clear()
        return taken

    async def position(self, delay_partition: TopicPartition) -> int:
        """The next offset of ``delay_partition`` not yet in the schedule."""
        position = self._positions.get(delay_partition)
        if position is None:
            position = await asyncio.to_thread(self.store.position, delay_partition)
            self._positions[delay_partition] = position
        return position

    def set_position(self, delay_partition: TopicPartition, position: int) -> None:
        self._positions[delay_partition] = position

    def close(self) -> None:
        """Ends the chunk worker and closes the store (blocking, briefly)."""
        self.chunk_worker.close()
        self.store.close()

    async def forget_topic(self, topic: str, delay_topic: str) -> None:
        """``topic`` was deleted: its pending records go with it."""
        async with self.lock:
            await asyncio.to_thread(self.store.forget_topic, topic, delay_topic)
            for delay_partition in [tp for tp in self._positions if tp.topic == delay_topic]:
                del self._positions[delay_partition]
