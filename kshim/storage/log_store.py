"""All partition logs of a broker, under ``{data_dir}/logs/{topic}-{partition}``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from kshim.protocol.record_batch import BatchHeader
from kshim.storage import interface
from kshim.storage.filesystem import FileSystem, OsFileSystem
from kshim.storage.interface import Clock, LogConfig, TopicPartition
from kshim.storage.partition_log import DiskPartitionLog


class DiskLogStore:
    """The disk implementation of interface.LogStore. Use from the event loop only."""

    def __init__(self, data_dir: str, clock: Clock, filesystem: FileSystem | None = None) -> None:
        self.logs_dir = os.path.join(data_dir, "logs")
        self._clock = clock
        self._fs = filesystem or OsFileSystem()
        self._logs: dict[TopicPartition, DiskPartitionLog] = {}

    def directory_of(self, topic_partition: TopicPartition) -> str:
        return os.path.join(self.logs_dir, str(topic_partition))

    async def open(
        self,
        topic_partition: TopicPartition,
        config: LogConfig,
        log_start_offset: int,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> DiskPartitionLog:
        """Opens (recovering) or creates the partition's log and registers it; see
        interface.LogStore.open. Recovery runs in a worker thread."""
        log = await DiskPartitionLog.open(
            topic_partition,
            self.directory_of(topic_partition),
            config,
            self._fs,
            self._clock,
            log_start_offset,
            on_batch,
        )
        self._logs[topic_partition] = log
        return log

    def get(self, topic_partition: TopicPartition) -> DiskPartitionLog | None:
        """The partition's open log, if any."""
        return self._logs.get(topic_partition)

    async def delete(self, topic_partition: TopicPartition) -> None:
        """Closes the log and removes its files (in a worker thread)."""
        log = self._logs.pop(topic_partition, None)
        if log is not None:
            await log.close()
        await asyncio.to_thread(self._fs.remove_directory, self.directory_of(topic_partition))

    async def close(self) -> None:
        """Waits for pending writes, then closes every log."""
        for log in list(self._logs.values()):
            await log.close()
        self._logs.clear()


# Checked by mypy: the disk classes implement the protocols the broker relies on.
_DISK_LOG: type[interface.PartitionLog] = DiskPartitionLog
_DISK_STORE: type[interface.LogStore] = DiskLogStore
