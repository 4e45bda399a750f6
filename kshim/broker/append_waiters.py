"""Long-polling fetches waiting for appends: woken when a partition's high watermark moves."""

from __future__ import annotations

import asyncio

from kshim.storage.interface import TopicPartition


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class AppendWaiters:
    """Wakes long-polling fetches when a partition's high watermark advances."""

    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def notify(self, topic_partition: TopicPartition) -> None:
        for future in self._waiting.pop(topic_partition, ()):
            _resolve(future)

    async def wait_any(self, partitions: list[TopicPartition], timeout_s: float) -> None:
        """Returns when any of ``partitions`` advances, or after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        for topic_partition in partitions:
            self._waiting.setdefault(topic_partition, set()).add(future)
        # A timer resolving the future itself, not asyncio.wait_for: wait_for wraps the
        # future in a second one and wakes this task a loop turn later, on the path from
        # an append to the consumer.
        timer = loop.call_later(timeout_s, _resolve, future)
        try:
            await future
        finally:
            timer.cancel()
            for topic_partition in partitions:
                waiting = self._waiting.get(topic_partition)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiting[topic_partition]
