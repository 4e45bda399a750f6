"""Power cuts in the middle of a compaction pass, and reads that straddle its swap.

A SimulatedFileSystem stands in for the disk and cuts the power at the n-th file
operation of a pass, for every n: then the store is recovered from what survived
(unsynced bytes lost, or torn at random). Each range of offsets a cleaned segment covers
must read back exactly as before the pass or exactly as after it (never both, never
neither, and never half a segment), with offsets strictly increasing; no unfinished file
is left behind, and the recovered log compacts to the same result and takes new writes.
On real files, a read planned over an old segment keeps its file until it is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Collection
from pathlib import Path

import pytest

from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import LogConfig, PartitionLog, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.retention import SegmentSummary
from kshim.testing import FakeClock
from tests.storage.compaction_support import (
    StoredRecord,
    Write,
    append_writes,
    compact,
    read_records,
    request,
)

DATA_DIR = "/data"
PARTITION = TopicPartition("cut", 0)
CONFIG = LogConfig(segment_bytes=300, memtable_bytes=0)
WRITES: list[Write] = [
    (b"k%d" % (index % 5), None if index % 11 == 3 else b"v%d" % index) for index in range(60)
]


class PowerCut(Exception):
    """The power went: this and every later change to the disk fails."""


class CuttingFileSystem(SimulatedFileSystem):
    """Counts the operations that change the disk; the ``cut_after``-th and later fail."""

    def __init__(self) -> None:
        super().__init__()
        self.changes = 0
        self.cut_after: int | None = None

    def _change(self) -> None:
        if self.cut_after is not None and self.changes >= self.cut_after:
            raise PowerCut
        self.changes += 1

    def open_append(self, path: str) -> int:
        self._change()
        return super().open_append(path)

    def open_write(self, path: str, position: int) -> int:
        self._change()
        return super().open_write(path, position)

    def allocate(self, descriptor: int, size: int) -> None:
        self._change()
        super().allocate(descriptor, size)

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        self._change()
        super().write(descriptor, data)

    def fsync(self, descriptor: int) -> None:
        self._change()
        super().fsync(descriptor)

    def fsync_directory(self, path: str) -> None:
        self._change()
        super().fsync_directory(path)

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        self._change()
        super().sync_all(paths, directories)

    def truncate(self, path: str, length: int) -> None:
        self._change()
        super().truncate(path, length)

    def remove(self, path: str) -> None:
        self._change()
        super().remove(path)

    def rename(self, source: str, target: str) -> None:
        self._change()
        super().rename(source, target)


async def _prepared(filesystem: SimulatedFileSystem) -> tuple[DiskLogStore, PartitionLog]:
    """A log of 60 keyed records and tombstones over ~20 segments, all of it sealed."""
    store = DiskLogStore(DATA_DIR, FakeClock(), filesystem)
    log = await store.open(PARTITION, CONFIG, 0)
    await append_writes(log, WRITES, per_batch=2)
    await store.checkpoint()
    return store, log


async def _reference() -> tuple[list[StoredRecord], list[StoredRecord], list[SegmentSummary], int]:
    """The records before and after an uninterrupted pass, the cleaned segments, and how
    many disk changes the pass makes."""
    filesystem = CuttingFileSystem()
    store, log = await _prepared(filesystem)
    before = await read_records(log)
    changes = filesystem.changes
    await log.compact(request())
    changes = filesystem.changes - changes
    after = await read_records(log)
    summaries = log.segment_summaries()
    await store.close()
    return before, after, summaries, changes


def _in_range(records: list[StoredRecord], segment: SegmentSummary) -> list[StoredRecord]:
    return [r for r in records if segment.base_offset <= r.offset < segment.next_offset]


async def _cut_and_recover(
    cut_after: int, rng: random.Random | None
) -> tuple[DiskLogStore, PartitionLog, SimulatedFileSystem]:
    filesystem = CuttingFileSystem()
    _, log = await _prepared(filesystem)  # dropped at the cut, as a crashed process is
    filesystem.cut_after = filesystem.changes + cut_after
    with contextlib.suppress(PowerCut):
        await log.compact(request())
    survivor = filesystem.after_power_loss(rng)
    recovered = DiskLogStore(DATA_DIR, FakeClock(), survivor)
    return recovered, await recovered.open(PARTITION, CONFIG, 0), survivor


@pytest.mark.parametrize("torn", [False, True], ids=["clean-cut", "torn-tails"])
async def test_a_cut_anywhere_in_a_pass_leaves_old_or_new_segments(torn: bool) -> None:
    before, after, cleaned, changes = await _reference()
    assert len(after) < len(before) and changes > 20
    for cut_after in range(changes + 1):
        rng = random.Random(cut_after) if torn else None
        store, log, filesystem = await _cut_and_recover(cut_after, rng)
        records = await read_records(log)
        offsets = [record.offset for record in records]
        assert offsets == sorted(set(offsets)), f"cut after {cut_after}"
        for segment in cleaned[:-1]:
            found = _in_range(records, segment)
            assert found in (_in_range(before, segment), _in_range(after, segment)), (
                f"cut after {cut_after}: offsets {segment.base_offset}-{segment.next_offset}"
            )
        names = filesystem.list_directory(store.directory_of(PARTITION))
        assert not [name for name in names if name.endswith(".cleaned")]
        await log.compact(request())
        assert await read_records(log) == after, f"cut after {cut_after}: compacted again"
        assert await append_writes(log, [(b"new", b"1")]) == [60]
        await store.close()


def _exists(path: str) -> bool:
    return os.path.exists(path)


async def test_a_read_under_way_keeps_the_old_segment_file(tmp_path: Path) -> None:
    store = DiskLogStore(str(tmp_path), FakeClock())
    log = await store.open(PARTITION, CONFIG, 0)
    await append_writes(log, WRITES, per_batch=2)
    await store.checkpoint()
    assert isinstance(log, type(store.get(PARTITION)))
    old_path = log.segments[0].path  # type: ignore[attr-defined]
    with log.reads.pinned([old_path]):  # type: ignore[attr-defined]
        compaction = asyncio.create_task(compact(store, log))
        deadline = time.monotonic() + 10
        while log.segments[0].path == old_path:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the cleaned segment was never swapped in"
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)  # the pass goes on to its other groups meanwhile
        assert _exists(old_path), "deleted under a read"
        assert not compaction.done()
    await compaction
    assert not _exists(old_path)
    names = os.listdir(store.directory_of(PARTITION))
    assert {name.split(".")[1] for name in names if name.endswith(".log")} == {"1", "log"}
    await store.close()
