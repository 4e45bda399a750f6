"""A flush round that ends while a checkpoint runs still gets its checkpoint, with no more
writes: its batches reach the segment files and a segment it rolled is sealed (which is
what makes a segment compactable)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Collection

from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import LogConfig, StoreSettings, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.testing import FakeClock
from tests.storage.compaction_support import append_writes

INTERVAL_MS = 20


class GatedFileSystem(SimulatedFileSystem):
    """Holds every checkpoint's sync until ``gate`` is set; ``syncing`` says one waits."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.syncing = threading.Event()

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        self.syncing.set()
        assert self.gate.wait(10)
        super().sync_all(paths, directories)


async def test_a_round_during_a_checkpoint_is_checkpointed_later() -> None:
    filesystem = GatedFileSystem()
    settings = StoreSettings(checkpoint_interval_ms=INTERVAL_MS)
    store = DiskLogStore("/data", FakeClock(), filesystem, settings)
    log = await store.open(TopicPartition("t", 0), LogConfig(segment_bytes=1), 0)
    await append_writes(log, [(b"k", b"first")])
    deadline = time.monotonic() + 10
    while not filesystem.syncing.is_set():  # the interval's checkpoint is under way
        assert time.monotonic() < deadline
        await asyncio.sleep(0.005)
    await append_writes(log, [(b"k", b"second"), (b"k", b"third")])  # rounds meanwhile
    filesystem.gate.set()
    while not all(segment.sealed for segment in log.segments[:-1]):
        assert time.monotonic() < deadline, "the rounds' segments were never checkpointed"
        await asyncio.sleep(0.005)
    assert not log.writer.unsynced_paths
    await store.close()
