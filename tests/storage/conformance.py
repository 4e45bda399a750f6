"""The log stores every conformance test runs over, and a harness to open their logs.

Each implementation of ``interface.LogStore`` is listed once here: the disk
store reading recent batches from its memtable, the disk store reading
everything back from segment files, the disk store on the simulated
filesystem (no real files), and the in-memory twin. A test asks for the
``harness`` fixture (tests/storage/conftest.py) and runs over all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kshim.protocol.record_batch import BatchHeader
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import LogConfig, LogStore, PartitionLog, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.testing import FakeClock
from tests.storage.support import DEFAULT_CONFIG, TOPIC_PARTITION


@dataclass(frozen=True)
class Implementation:
    name: str
    make_store: Callable[[Path, FakeClock], LogStore]
    memtable_bytes: int | None = None  # forced on every config; None: as the test asks


IMPLEMENTATIONS = [
    Implementation("memory", lambda _, clock: MemoryLogStore(clock)),
    Implementation("disk", lambda directory, clock: DiskLogStore(str(directory), clock)),
    Implementation("disk-files", lambda directory, clock: DiskLogStore(str(directory), clock), 0),
    Implementation(
        "simulated",
        lambda _, clock: DiskLogStore("/data", clock, SimulatedFileSystem()),
        0,
    ),
]


class Harness:
    """One store of one implementation, with a fake clock it rolls segments by."""

    def __init__(self, implementation: Implementation, directory: Path) -> None:
        self.name = implementation.name
        self.clock = FakeClock()
        self.store = implementation.make_store(directory, self.clock)
        self._memtable_bytes = implementation.memtable_bytes

    async def open(
        self,
        config: LogConfig = DEFAULT_CONFIG,
        log_start_offset: int = 0,
        on_batch: Callable[[BatchHeader], None] | None = None,
        topic_partition: TopicPartition = TOPIC_PARTITION,
    ) -> PartitionLog:
        if self._memtable_bytes is not None:
            config = replace(config, memtable_bytes=self._memtable_bytes)
        return await self.store.open(topic_partition, config, log_start_offset, on_batch)

    async def reopen(
        self,
        config: LogConfig = DEFAULT_CONFIG,
        log_start_offset: int = 0,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> PartitionLog:
        """A restart: closes every log of the store, then opens the partition again."""
        await self.store.close()
        return await self.open(config, log_start_offset, on_batch)
