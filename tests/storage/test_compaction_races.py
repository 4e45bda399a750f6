"""Compaction racing retention and deletion on the disk store.

While a cleaned segment is being committed (its rename held up here), retention drops
the oldest segments, or the partition is deleted: the swap must notice, leave no cleaned
file that would overlap nothing on the next start, and the log must recover cleanly.
"""

from __future__ import annotations

import asyncio
import threading
import time

from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import LogConfig, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.testing import FakeClock
from tests.storage.compaction_support import append_writes, read_records, request

PARTITION = TopicPartition("race", 0)
CONFIG = LogConfig(segment_bytes=1, memtable_bytes=0)  # a segment per batch


class GatedRenames(SimulatedFileSystem):
    """Holds every rename (a compaction's commit) until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.renaming = threading.Event()

    def rename(self, source: str, target: str) -> None:
        if target.endswith(".log"):
            self.renaming.set()
            assert self.gate.wait(10)
        super().rename(source, target)


async def _held_commit(filesystem: GatedRenames) -> None:
    deadline = time.monotonic() + 10
    while not filesystem.renaming.is_set():
        assert time.monotonic() < deadline, "no commit began"
        await asyncio.sleep(0.002)


async def test_retention_dropping_a_group_under_commit_undoes_the_commit() -> None:
    filesystem = GatedRenames()
    store = DiskLogStore("/data", FakeClock(), filesystem)
    log = await store.open(PARTITION, CONFIG, 0)
    await append_writes(log, [(b"k", b"%d" % index) for index in range(6)])
    await store.checkpoint()
    compaction = asyncio.create_task(log.compact(request()))
    await _held_commit(filesystem)
    retention = asyncio.create_task(log.drop_oldest_segments(3, 3))
    await asyncio.sleep(0)  # retention drops them from the log at once, files later
    filesystem.gate.set()
    await compaction
    await retention
    assert [record.offset for record in await read_records(log)] == [4, 5]
    await store.close()
    store = DiskLogStore("/data", FakeClock(), filesystem)
    log = await store.open(PARTITION, CONFIG, 3)
    assert [record.offset for record in await read_records(log)] == [4, 5]
    names = filesystem.list_directory(store.directory_of(PARTITION))
    assert next(name for name in names if name.endswith(".log")).startswith(f"{3:020d}")
    await store.close()


async def test_a_deletion_under_commit_wins() -> None:
    filesystem = GatedRenames()
    store = DiskLogStore("/data", FakeClock(), filesystem)
    log = await store.open(PARTITION, CONFIG, 0)
    await append_writes(log, [(b"k", b"%d" % index) for index in range(6)])
    await store.checkpoint()
    compaction = asyncio.create_task(log.compact(request()))
    await _held_commit(filesystem)
    deletion = asyncio.create_task(store.delete(PARTITION))
    await asyncio.sleep(0)
    filesystem.gate.set()
    await compaction
    await deletion
    assert filesystem.list_directory(store.directory_of(PARTITION)) == []
    log = await store.open(PARTITION, CONFIG, 0)
    assert await read_records(log) == []
    await store.close()
