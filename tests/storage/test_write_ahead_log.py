"""The shared write-ahead log, its checkpoints, and what the store shares among partitions:
recovery of the log's tail, deletions, bounded descriptors and memtables.

Power loss over many partitions is test_power_loss.py's; a real process killed with
kill -9 is tests/test_kill9.py's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path

import pytest

from kshim.storage.files.filesystem import OsFileSystem
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import (
    FileRegion,
    LogConfig,
    PartitionToOpen,
    StoreSettings,
    TopicPartition,
)
from kshim.storage.log import log_store
from kshim.storage.log.descriptor_cache import DescriptorCache
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.log.segment import SEGMENT_SUFFIX
from kshim.storage.log.wal_records import BATCH_RECORD, batch_record, delete_record, record_prefix
from kshim.storage.log.write_ahead_log import WAL_SUFFIX, CorruptWriteAheadLog, WriteAheadLog
from kshim.testing import FakeClock
from tests.storage.support import (
    LARGE_MEMTABLE,
    append_durable,
    producer_batch,
    read_everything,
    values_of,
)
from tests.storage.test_partition_log import CountingFileSystem

FIRST = TopicPartition("orders", 0)
SECOND = TopicPartition("payments", 3)
# Nothing is spilled or checkpointed unless a test asks: batches stay in the log only.
NO_BACKGROUND = StoreSettings(
    memtable_total_bytes=1 << 30, checkpoint_bytes=1 << 40, checkpoint_interval_ms=1 << 40
)


def stored(offset: int, label: str) -> bytes:
    batch, _ = producer_batch(1, label=label)
    batch[0:8] = offset.to_bytes(8, "big")
    return bytes(batch)


def wal_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(WAL_SUFFIX))


# The log's files.


def test_records_are_found_again_by_partition_in_order(tmp_path: Path) -> None:
    wal = WriteAheadLog(OsFileSystem(), str(tmp_path))
    assert wal.recover().batches == {}
    first, second = record_prefix(BATCH_RECORD, FIRST), record_prefix(BATCH_RECORD, SECOND)
    batches = [(first, stored(0, "a")), (second, stored(0, "b")), (first, stored(1, "c"))]
    wal.write([part for prefix, batch in batches for part in batch_record(prefix, batch)], True)
    wal.close()
    reopened = WriteAheadLog(OsFileSystem(), str(tmp_path))
    tail = reopened.recover()
    found = {
        partition: [reopened.read_batch(batch) for batch in logged]
        for partition, logged in tail.batches.items()
    }
    assert found == {FIRST: [batches[0][1], batches[2][1]], SECOND: [batches[1][1]]}
    reopened.close()


def test_a_torn_last_record_is_cut_off(tmp_path: Path) -> None:
    wal = WriteAheadLog(OsFileSystem(), str(tmp_path))
    wal.recover()
    prefix = record_prefix(BATCH_RECORD, FIRST)
    wal.write([*batch_record(prefix, stored(0, "kept"))], True)
    kept_end = wal.end
    wal.write([*batch_record(prefix, stored(1, "torn"))], True)
    wal.close()
    (path,) = wal_files(tmp_path)
    os.truncate(tmp_path / path, wal.end - 3)  # the file starts at position 0
    reopened = WriteAheadLog(OsFileSystem(), str(tmp_path))
    tail = reopened.recover()
    assert [reopened.read_batch(batch) for batch in tail.batches[FIRST]] == [stored(0, "kept")]
    assert os.path.getsize(tmp_path / path) == kept_end == reopened.end
    reopened.close()


def test_damage_before_the_last_file_is_refused(tmp_path: Path) -> None:
    """Only the last file can end torn (a full file is synced before the next starts):
    damage in an earlier one may hide acknowledged records after it."""
    wal = WriteAheadLog(OsFileSystem(), str(tmp_path), segment_bytes=200)
    wal.recover()
    prefix = record_prefix(BATCH_RECORD, FIRST)
    for offset in range(4):
        wal.write([*batch_record(prefix, stored(offset, "x"))], True)
    wal.close()
    files = wal_files(tmp_path)
    assert len(files) > 1
    damaged = bytearray((tmp_path / files[0]).read_bytes())
    damaged[-5] ^= 0xFF
    (tmp_path / files[0]).write_bytes(bytes(damaged))
    with pytest.raises(CorruptWriteAheadLog):
        WriteAheadLog(OsFileSystem(), str(tmp_path)).recover()


def test_a_deletion_drops_the_partitions_earlier_records(tmp_path: Path) -> None:
    wal = WriteAheadLog(OsFileSystem(), str(tmp_path))
    wal.recover()
    prefix = record_prefix(BATCH_RECORD, FIRST)
    parts = [*batch_record(prefix, stored(0, "old")), delete_record(FIRST)]
    wal.write([*parts, *batch_record(prefix, stored(0, "new"))], True)
    wal.close()
    reopened = WriteAheadLog(OsFileSystem(), str(tmp_path))
    tail = reopened.recover()
    assert [reopened.read_batch(batch) for batch in tail.batches[FIRST]] == [stored(0, "new")]
    reopened.close()


def test_a_checkpoint_deletes_the_files_before_it(tmp_path: Path) -> None:
    wal = WriteAheadLog(OsFileSystem(), str(tmp_path), segment_bytes=200)
    wal.recover()
    prefix = record_prefix(BATCH_RECORD, FIRST)
    for offset in range(6):
        wal.write([*batch_record(prefix, stored(offset, "x"))], True)
    before = wal_files(tmp_path)
    middle = wal.end
    wal.write([*batch_record(prefix, stored(6, "after"))], True)
    wal.checkpoint(middle)
    after = wal_files(tmp_path)
    assert len(after) < len(before)
    assert all(int(name[: -len(WAL_SUFFIX)]) < wal.end for name in after)
    wal.close()
    reopened = WriteAheadLog(OsFileSystem(), str(tmp_path))
    tail = reopened.recover()  # only what follows the checkpoint
    assert [reopened.read_batch(batch) for batch in tail.batches[FIRST]] == [stored(6, "after")]
    reopened.close()


# The store: what only the write-ahead log held, after a crash.


async def test_batches_only_in_the_log_are_replayed_after_a_crash(tmp_path: Path) -> None:
    """A store that never spilled is abandoned without closing (the process died): the
    next one finds every acknowledged batch, from the write-ahead log alone."""
    crashed = DiskLogStore(str(tmp_path), FakeClock(), settings=NO_BACKGROUND)
    first = await crashed.open(FIRST, LARGE_MEMTABLE, 0)
    second = await crashed.open(SECOND, LARGE_MEMTABLE, 0)
    for index in range(3):
        # One round for both: a round over several partitions goes through the log only.
        first_offset = first.append(*producer_batch(2, label=f"f{index}"))
        second_offset = second.append(*producer_batch(1, label=f"s{index}"))
        await first.wait_durable(first_offset + 1)
        await second.wait_durable(second_offset)
    assert not (tmp_path / "logs" / str(FIRST) / f"{0:020d}.log").exists()
    restarted = DiskLogStore(str(tmp_path), FakeClock())
    logs = await restarted.recover(
        [PartitionToOpen(FIRST, LARGE_MEMTABLE, 0), PartitionToOpen(SECOND, LARGE_MEMTABLE, 0)]
    )
    assert [log.log_end_offset for log in logs] == [6, 3]
    assert values_of(await read_everything(logs[1])) == [(0, b"s0-0"), (1, b"s1-0"), (2, b"s2-0")]
    assert await append_durable(logs[0], 1, "after") == 6
    # Recovery ended with a checkpoint: the segment files hold it all, the old log is gone.
    assert (tmp_path / "logs" / str(FIRST) / f"{0:020d}.log").exists()
    await restarted.close()
    await crashed.close()


async def test_a_deleted_partition_is_not_replayed_into_a_new_one(tmp_path: Path) -> None:
    crashed = DiskLogStore(str(tmp_path), FakeClock(), settings=NO_BACKGROUND)
    old = await crashed.open(FIRST, LARGE_MEMTABLE, 0)
    await append_durable(old, 3, "old")
    await crashed.delete(FIRST)
    new = await crashed.open(FIRST, LARGE_MEMTABLE, 0)
    await append_durable(new, 1, "new")
    restarted = DiskLogStore(str(tmp_path), FakeClock())
    (log,) = await restarted.recover([PartitionToOpen(FIRST, LARGE_MEMTABLE, 0)])
    assert values_of(await read_everything(log)) == [(0, b"new-0")]
    await restarted.close()
    await crashed.close()


async def test_recovery_deletes_what_unlisted_partitions_left(tmp_path: Path) -> None:
    """A topic deleted in the metadata while the broker went down before its files were:
    its directory goes, and a topic of the same name created later starts empty."""
    store = DiskLogStore(str(tmp_path), FakeClock())
    for partition in (FIRST, SECOND):
        await append_durable(await store.open(partition, LARGE_MEMTABLE, 0), 2)
    await store.close()
    restarted = DiskLogStore(str(tmp_path), FakeClock())
    await restarted.recover([PartitionToOpen(SECOND, LARGE_MEMTABLE, 0)])
    assert os.listdir(restarted.logs_dir) == [str(SECOND)]
    created = await restarted.open(FIRST, LARGE_MEMTABLE, 0)
    assert created.log_end_offset == 0
    await restarted.close()


async def test_an_unopened_partition_keeps_its_records_in_the_log(tmp_path: Path) -> None:
    """Until a partition is opened after a restart, checkpoints do not pass its records."""
    crashed = DiskLogStore(str(tmp_path), FakeClock(), settings=NO_BACKGROUND)
    await append_durable(await crashed.open(FIRST, LARGE_MEMTABLE, 0), 2, "first")
    await append_durable(await crashed.open(SECOND, LARGE_MEMTABLE, 0), 1, "second")
    restarted = DiskLogStore(str(tmp_path), FakeClock())
    only_second = await restarted.open(SECOND, LARGE_MEMTABLE, 0)
    await append_durable(only_second, 1)
    await restarted.checkpoint()
    await restarted.close()
    again = DiskLogStore(str(tmp_path), FakeClock())
    first = await again.open(FIRST, LARGE_MEMTABLE, 0)
    assert values_of(await read_everything(first)) == [(0, b"first-0"), (1, b"first-1")]
    await again.close()
    await crashed.close()


# What partitions share: descriptors and memory, bounded.


async def test_descriptors_stay_bounded_over_many_partitions(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    settings = StoreSettings(max_open_files=16, memtable_total_bytes=16 << 10)
    store = DiskLogStore(str(tmp_path), FakeClock(), filesystem, settings)
    config = LogConfig(memtable_bytes=0)  # reads come from the segment files
    partitions = [TopicPartition(f"topic-{index}", 0) for index in range(300)]
    logs = [await store.open(partition, config, 0) for partition in partitions]
    for round_number in range(2):
        for log in logs:
            await append_durable(log, 1, f"r{round_number}")
    await store.checkpoint()
    for log in logs:
        assert [value for _, value in values_of(await read_everything(log))] == [b"r0-0", b"r1-0"]
    # The cache's 16, the write-ahead log's file, and one for a sync or a recovery read.
    assert filesystem.most_open <= 16 + 2
    assert store.descriptors.open_count <= 16
    await store.close()
    assert filesystem.open_descriptors == 0


async def test_memtables_together_stay_within_their_budget(tmp_path: Path) -> None:
    settings = StoreSettings(memtable_total_bytes=64 << 10)
    store = DiskLogStore("/data", FakeClock(), SimulatedFileSystem(), settings)
    logs = [
        await store.open(TopicPartition(f"topic-{index}", 0), LARGE_MEMTABLE, 0)
        for index in range(100)
    ]
    for _ in range(5):
        for log in logs:
            await append_durable(log, 10, "x" * 40)  # ~1 KiB: 500 KiB in all
    await store.checkpoint()
    assert sum(log.memtable_bytes for log in logs) <= 64 << 10
    for log in logs:  # what left memory is read from the files
        assert len(values_of(await read_everything(log))) == 50
    await store.close()


def test_zero_copy_reads_are_bounded_then_read_into_memory(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"0123456789")
    cache = DescriptorCache(OsFileSystem(), capacity=4, region_capacity=2)
    first = cache.read_chunk(str(path), 4, 0)
    second = cache.read_chunk(str(path), 4, 2)
    third = cache.read_chunk(str(path), 4, 4)
    assert isinstance(first, FileRegion) and isinstance(second, FileRegion)
    assert third == b"4567"  # two regions are out: this one is read into memory
    assert first.read_bytes() == b"0123"  # sent and closed: a region may go out again
    again = cache.read_chunk(str(path), 3, 7)
    assert isinstance(again, FileRegion) and again.read_bytes() == b"789"
    second.close()
    cache.close()


class SegmentGate(CountingFileSystem):
    """Holds the first write to a segment file (a spill) until released."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.released = threading.Event()

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        if self._paths[descriptor].endswith(SEGMENT_SUFFIX) and not self.entered.is_set():
            self.entered.set()
            self.released.wait(timeout=30)
        super().write(descriptor, data)


async def test_appends_wait_while_spills_fall_behind(tmp_path: Path) -> None:
    """A disk too slow for spills holds flush rounds back once more is waiting to be spilled
    than all memtables may hold, so memory stays bounded; nothing is lost meanwhile."""
    filesystem = SegmentGate()
    settings = StoreSettings(memtable_total_bytes=4096)
    store = DiskLogStore(str(tmp_path), FakeClock(), filesystem, settings)
    log = await store.open(FIRST, LARGE_MEMTABLE, 0)
    other = await store.open(SECOND, LARGE_MEMTABLE, 0)
    while not filesystem.entered.is_set():  # until a spill starts, and blocks
        # Rounds over two partitions go through the log, so their batches wait for spills.
        offset = log.append(*producer_batch(10, label="before"))
        other.append(*producer_batch(1, label="other"))
        await log.wait_durable(offset + 9)
        await asyncio.sleep(0)
    for _ in range(40):  # past the budget, while the spill is held
        log.append(*producer_batch(10, label="held"))
    waiting = asyncio.create_task(log.wait_durable(log.log_end_offset - 1))
    await asyncio.sleep(0.2)
    assert not waiting.done(), "a round ran while spills were behind"
    filesystem.released.set()
    await asyncio.wait_for(waiting, 30)
    assert log.high_watermark == log.log_end_offset
    values = values_of(await read_everything(log))
    assert len(values) == log.log_end_offset
    await store.close()


async def test_a_long_recovery_says_how_far_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = DiskLogStore(str(tmp_path), FakeClock())
    for partition in (FIRST, SECOND):
        await append_durable(await store.open(partition, LARGE_MEMTABLE, 0), 2)
    await store.close()
    monkeypatch.setattr(log_store, "RECOVERY_PROGRESS_INTERVAL_S", 0.0)  # a line per partition
    restarted = DiskLogStore(str(tmp_path), FakeClock())
    with caplog.at_level(logging.INFO, log_store.__name__):
        await restarted.recover([PartitionToOpen(p, LARGE_MEMTABLE, 0) for p in (FIRST, SECOND)])
    lines = [record.getMessage() for record in caplog.records if "recovering" in record.message]
    assert [line.split(" partitions,")[0] for line in lines[:2]] == [
        "recovering logs: 50% (1 of 2",
        "recovering logs: 100% (2 of 2",
    ]
    assert lines[2].startswith("recovering logs: done, 2 partitions in ")
    await restarted.close()
