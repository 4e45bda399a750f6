"""The disk store on a real directory: files, rolls, recovery, group commit, fsyncs.

What any log store must do (offsets, reads, watermarks, timestamp lookups)
is tested over the disk store and the in-memory one alike in
test_log_store_conformance*.py; this file keeps what only the disk store has.
The write-ahead log, checkpoints and the bounded descriptors have their own
tests in test_write_ahead_log.py.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kshim.protocol.record_batch import BatchHeader, validate_produced
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.files.filesystem import OsFileSystem
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import (
    FileRegion,
    LogConfig,
    LogFailed,
    StoreSettings,
    TopicPartition,
)
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.log.partition_log import DiskPartitionLog
from kshim.storage.log.segment import SEGMENT_SUFFIX, segment_file_name
from kshim.storage.log.write_ahead_log import WAL_SUFFIX
from kshim.testing import FakeClock
from tests.storage.support import (
    LARGE_MEMTABLE,
    TOPIC_PARTITION,
    UNBOUNDED,
    Read,
    append_durable,
    batch_bases,
    joined,
    producer_batch,
    read_bytes,
    read_everything,
    values_of,
)


class CountingFileSystem:
    """Delegates to OsFileSystem and counts the calls that matter for durability.

    ``unsynced`` holds the segment paths written since they were last made durable;
    ``wal_fsyncs`` and ``segment_fsyncs`` count the fsyncs of the write-ahead log and of
    segment files (what an acknowledgement waits for: a round over one partition fsyncs
    its segment file, group_commit.py); ``open_descriptors`` and ``most_open`` count
    descriptors the store holds.
    """

    def __init__(self) -> None:
        self._inner = OsFileSystem()
        self._paths: dict[int, str] = {}
        self.wal_fsyncs = 0
        self.segment_fsyncs = 0
        self.segment_writes = 0
        self.wal_writes = 0
        self.unsynced: set[str] = set()
        self.fail_writes = False
        self.most_open = 0

    @property
    def sync_count(self) -> int:
        return self._inner.sync_count

    @property
    def open_descriptors(self) -> int:
        return len(self._paths)

    def _opened(self, descriptor: int, path: str) -> int:
        self._paths[descriptor] = path
        self.most_open = max(self.most_open, len(self._paths))
        return descriptor

    def open_append(self, path: str) -> int:
        return self._opened(self._inner.open_append(path), path)

    def open_write(self, path: str, position: int) -> int:
        return self._opened(self._inner.open_write(path, position), path)

    def open_read(self, path: str) -> int:
        return self._opened(self._inner.open_read(path), path)

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        if self.fail_writes:
            raise OSError(28, "No space left on device")
        path = self._paths[descriptor]
        if path.endswith(SEGMENT_SUFFIX):
            self.segment_writes += 1
            self.unsynced.add(path)
        if path.endswith(WAL_SUFFIX):
            self.wal_writes += 1
        self._inner.write(descriptor, data)

    def fsync(self, descriptor: int) -> None:
        path = self._paths[descriptor]
        self.wal_fsyncs += path.endswith(WAL_SUFFIX)
        self.segment_fsyncs += path.endswith(SEGMENT_SUFFIX)
        self.unsynced.discard(path)
        self._inner.fsync(descriptor)

    @property
    def data_fsyncs(self) -> int:
        """fsyncs of the files holding batches (not directories, not checkpoints)."""
        return self.wal_fsyncs + self.segment_fsyncs

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        self.unsynced -= set(paths)
        self._inner.sync_all(paths, directories)

    def close(self, descriptor: int) -> None:
        self._paths.pop(descriptor, None)
        self._inner.close(descriptor)

    def __getattr__(self, name: str) -> Any:
        # Anything not counted here goes straight to the real filesystem.
        return getattr(self._inner, name)


@dataclass
class Opened:
    """A store on a directory and one partition's log in it."""

    store: DiskLogStore
    log: DiskPartitionLog
    directory: Path  # the partition's

    async def reopen(self, config: LogConfig = LARGE_MEMTABLE) -> DiskPartitionLog:
        """A clean restart: closes the store, then opens the partition again."""
        await self.store.close()
        self.log = await self.store.open(TOPIC_PARTITION, config, 0)
        return self.log


async def open_log(
    data_dir: Path,
    config: LogConfig = LARGE_MEMTABLE,
    filesystem: CountingFileSystem | None = None,
    clock: FakeClock | None = None,
    log_start_offset: int = 0,
    settings: StoreSettings | None = None,
) -> Opened:
    store = DiskLogStore(
        str(data_dir), clock or FakeClock(), filesystem or CountingFileSystem(), settings
    )
    log = await store.open(TOPIC_PARTITION, config, log_start_offset)
    return Opened(store, log, Path(store.directory_of(TOPIC_PARTITION)))


def segment_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".log"))


async def test_opening_creates_the_directory(tmp_path: Path) -> None:
    opened = await open_log(tmp_path)
    assert await read_bytes(opened.log, 0) == Read(b"", 0)
    assert opened.directory.is_dir()
    await opened.store.close()


async def test_memtable_eviction_serves_reads_from_disk(tmp_path: Path) -> None:
    tiny = LogConfig(memtable_bytes=200)  # about two batches
    opened = await open_log(tmp_path, tiny)
    for index in range(10):
        await append_durable(opened.log, 2, f"n{index}")
    await opened.store.checkpoint()
    data = await read_everything(opened.log)
    assert [offset for offset, _ in values_of(data)] == list(range(20))
    assert values_of(data)[7] == (7, b"n3-1")
    # The same bytes whether they come from memory or from the segment file.
    assert (opened.directory / segment_file_name(0)).read_bytes() == data
    await opened.store.close()


async def test_reads_cross_from_the_segment_file_into_the_memtable(tmp_path: Path) -> None:
    """A read that starts below the memtable gets the spilled batches from the file and
    goes on with the newer ones from memory, in one answer, up to the high watermark."""
    opened = await open_log(tmp_path, LogConfig(memtable_bytes=0))
    for index in range(3):
        await append_durable(opened.log, 2, f"s{index}")
    await opened.store.checkpoint()  # spilled: read from the file from now on
    for index in range(3, 5):
        await append_durable(opened.log, 2, f"s{index}")  # in the memtable, not yet spilled
    result = await opened.log.read(0, UNBOUNDED)
    assert isinstance(result.chunks[0], FileRegion)
    data = joined(result.chunks)
    assert (batch_bases(data), result.end_offset) == ([0, 2, 4, 6, 8], 10)
    await opened.store.close()


async def test_segment_roll_by_size(tmp_path: Path) -> None:
    one = len(producer_batch(2, label="r0")[0])
    config = LogConfig(segment_bytes=3 * one, memtable_bytes=0)
    opened = await open_log(tmp_path, config)
    log = opened.log
    for index in range(10):
        await append_durable(log, 2, f"r{index}")
    await opened.store.checkpoint()
    assert segment_files(opened.directory) == [segment_file_name(base) for base in (0, 6, 12, 18)]
    assert [segment.base_offset for segment in log.segments] == [0, 6, 12, 18]
    # Rolled segments, once durable, are sealed: their index is a mapped file.
    assert [segment.sealed for segment in log.segments] == [True, True, True, False]
    sizes = [(opened.directory / name).stat().st_size for name in segment_files(opened.directory)]
    assert all(size <= 3 * one for size in sizes)
    data = await read_everything(log)
    assert [offset for offset, _ in values_of(data)] == list(range(20))
    assert values_of(data)[13] == (13, b"r6-1")
    # A read stops at the end of its segment; the next read continues in the following one.
    first = await read_bytes(log, 4)
    assert (batch_bases(first.data), first.end_offset) == ([4], 6)
    second = await read_bytes(log, first.end_offset)
    assert batch_bases(second.data) == [6, 8, 10]
    await opened.store.close()


async def test_oversized_batch_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    opened = await open_log(tmp_path, LogConfig(segment_bytes=100, memtable_bytes=0))
    for _ in range(3):
        await append_durable(opened.log, 5)  # each batch is larger than segment_bytes
    await opened.store.checkpoint()
    assert segment_files(opened.directory) == [segment_file_name(base) for base in (0, 5, 10)]
    values = values_of(await read_everything(opened.log))
    assert [offset for offset, _ in values] == list(range(15))
    await opened.store.close()


async def test_segment_roll_by_age(tmp_path: Path) -> None:
    clock = FakeClock()
    opened = await open_log(tmp_path, LogConfig(segment_ms=1000), clock=clock)
    await append_durable(opened.log, 1)
    clock.now_ms += 999
    await append_durable(opened.log, 1)
    assert len(opened.log.segments) == 1
    clock.now_ms += 1
    await append_durable(opened.log, 1)
    await opened.store.checkpoint()
    assert segment_files(opened.directory) == [segment_file_name(0), segment_file_name(2)]
    assert opened.log.segments[-1].created_ms == clock.now_ms
    await opened.store.close()


async def test_empty_log_starts_at_its_log_start_offset(tmp_path: Path) -> None:
    opened = await open_log(tmp_path, log_start_offset=100)
    assert (opened.log.log_start_offset, opened.log.log_end_offset) == (100, 100)
    assert await append_durable(opened.log, 2) == 100
    await opened.store.checkpoint()
    assert segment_files(opened.directory) == [segment_file_name(100)]
    await opened.store.close()


def append_to_file(path: Path, data: bytes) -> None:
    """Simulates a torn write at the end of a segment file (the store is closed)."""
    with path.open("ab") as handle:
        handle.write(data)


def stamped_batch(base_offset: int, count: int) -> bytearray:
    batch, _ = producer_batch(count, label="torn")
    batch[0:8] = base_offset.to_bytes(8, "big")
    return batch


@pytest.mark.parametrize("damage", ["garbage", "short garbage", "truncated batch", "flipped byte"])
async def test_torn_tail_is_truncated_on_reopen(tmp_path: Path, damage: str) -> None:
    opened = await open_log(tmp_path, LogConfig(memtable_bytes=0))
    for index in range(4):
        await append_durable(opened.log, 2, f"ok{index}")
    intact = await read_everything(opened.log)
    await opened.store.close()

    tail = {
        "garbage": b"\x5a" * 200,
        "short garbage": b"\x00\x01\x02",
        "truncated batch": bytes(stamped_batch(8, 3)[:-5]),
        "flipped byte": bytes(stamped_batch(8, 3)[:-1]) + bytes([stamped_batch(8, 3)[-1] ^ 0x01]),
    }[damage]
    path = opened.directory / segment_file_name(0)
    append_to_file(path, tail)

    reopened = await open_log(tmp_path, LogConfig(memtable_bytes=0))
    log = reopened.log
    assert path.stat().st_size == len(intact)
    assert (log.log_end_offset, log.high_watermark) == (8, 8)
    assert await read_everything(log) == intact
    assert await append_durable(log, 3, "new") == 8
    assert await append_durable(log, 1, "newer") == 11
    values = values_of(await read_everything(log))
    assert [offset for offset, _ in values] == list(range(12))
    assert values[8:] == [(8, b"new-0"), (9, b"new-1"), (10, b"new-2"), (11, b"newer-0")]
    await reopened.store.close()


async def test_torn_tail_in_the_last_of_several_segments(tmp_path: Path) -> None:
    one = len(producer_batch(2)[0])
    config = LogConfig(segment_bytes=2 * one, memtable_bytes=0)
    opened = await open_log(tmp_path, config)
    for _ in range(5):
        await append_durable(opened.log, 2)  # segments at 0, 4, 8
    await opened.store.close()
    append_to_file(opened.directory / segment_file_name(8), bytes(stamped_batch(10, 2))[:-1])
    reopened = await open_log(tmp_path, config)
    assert reopened.log.log_end_offset == 10
    assert await append_durable(reopened.log, 2) == 10
    assert batch_bases(await read_everything(reopened.log)) == [0, 2, 4, 6, 8, 10]
    await reopened.store.close()


async def test_group_commit_shares_fsyncs(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    opened = await open_log(tmp_path, filesystem=filesystem)
    log = opened.log
    producers, rounds = 20, 5
    acknowledged: list[int] = []

    async def produce(index: int) -> None:
        for round_number in range(rounds):
            batch, header = producer_batch(1, label=f"p{index}-{round_number}")
            base_offset = log.append(batch, header)
            await log.wait_durable(base_offset)
            acknowledged.append(base_offset)

    await asyncio.gather(*(produce(index) for index in range(producers)))
    appends = producers * rounds
    assert sorted(acknowledged) == list(range(appends))
    assert log.high_watermark == appends
    # Each round's twenty appends arrive together and share one fsync.
    assert 1 <= filesystem.data_fsyncs <= rounds < appends
    assert len(values_of(await read_everything(log))) == appends
    await opened.store.close()


async def test_one_fsync_for_a_round_over_a_thousand_partitions(tmp_path: Path) -> None:
    """A produce request for 1,000 partitions appends to each, then waits: the appends
    share one write-ahead log write and one fsync, and nothing is fsynced per partition."""
    filesystem = CountingFileSystem()
    store = DiskLogStore(str(tmp_path), FakeClock(), filesystem)
    partitions = [TopicPartition(f"topic-{index}", 0) for index in range(1000)]
    logs = [await store.open(partition, LARGE_MEMTABLE, 0) for partition in partitions]
    syncs_before = filesystem.sync_count
    for log in logs:
        log.append(*producer_batch(1, label=log.topic_partition.topic))
    for log in logs:
        await log.wait_durable(0)
    assert filesystem.wal_fsyncs == 1
    assert filesystem.wal_writes == 1
    assert filesystem.sync_count - syncs_before == 1
    assert filesystem.segment_writes == 0  # the segments get them later, at a spill
    await store.close()


async def test_each_acknowledgement_is_preceded_by_an_fsync(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    opened = await open_log(tmp_path, filesystem=filesystem)
    for index in range(4):
        await append_durable(opened.log, 1)
        assert filesystem.data_fsyncs == index + 1
    await opened.store.close()


async def test_a_round_over_one_partition_writes_its_segment_file_once(tmp_path: Path) -> None:
    """One partition's batches go straight to its segment file, fsynced there, and never
    through the write-ahead log; a round over several partitions still uses the log."""
    filesystem = CountingFileSystem()
    store = DiskLogStore(str(tmp_path), FakeClock(), filesystem)
    first = await store.open(TopicPartition("first", 0), LARGE_MEMTABLE, 0)
    second = await store.open(TopicPartition("second", 0), LARGE_MEMTABLE, 0)
    for _ in range(3):
        await append_durable(first, 2)
    assert (filesystem.wal_writes, filesystem.wal_fsyncs) == (0, 0)
    assert (filesystem.segment_writes, filesystem.segment_fsyncs) == (3, 3)
    assert not filesystem.unsynced
    first.append(*producer_batch(1))
    await append_durable(second, 1)
    assert (filesystem.wal_writes, filesystem.wal_fsyncs) == (1, 1)
    assert filesystem.segment_writes == 3  # the shared round's batches wait for a spill
    await store.close()
    reopened = DiskLogStore(str(tmp_path), FakeClock(), OsFileSystem())
    log = await reopened.open(TopicPartition("first", 0), LARGE_MEMTABLE, 0)
    assert batch_bases(await read_everything(log)) == [0, 2, 4, 6]
    await reopened.close()


async def test_relaxed_flush_messages_skips_fsyncs(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    opened = await open_log(tmp_path, LogConfig(flush_messages=3), filesystem)
    for _ in range(9):
        await append_durable(opened.log, 1)  # acknowledged after the write, not the fsync
    assert opened.log.high_watermark == 9
    assert filesystem.wal_writes == 9
    assert filesystem.wal_fsyncs == 3  # after messages 3, 6 and 9
    assert len(values_of(await read_everything(opened.log))) == 9
    await opened.store.close()


async def test_relaxed_flush_counts_records_not_batches(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    opened = await open_log(tmp_path, LogConfig(flush_messages=4), filesystem)
    await append_durable(opened.log, 3)
    assert filesystem.wal_fsyncs == 0
    await append_durable(opened.log, 2)
    assert filesystem.wal_fsyncs == 1
    await opened.store.close()


async def test_relaxed_flush_ms_bounds_unsynced_time(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    clock = FakeClock()
    config = LogConfig(flush_messages=1000, flush_ms=100)
    opened = await open_log(tmp_path, config, filesystem, clock)
    await append_durable(opened.log, 1)
    clock.now_ms += 99
    await append_durable(opened.log, 1)
    assert filesystem.wal_fsyncs == 0
    clock.now_ms += 1
    await append_durable(opened.log, 1)
    assert filesystem.wal_fsyncs == 1
    clock.now_ms += 50
    await append_durable(opened.log, 1)
    assert filesystem.wal_fsyncs == 1  # the timer restarted at the last fsync
    await opened.store.close()


async def test_a_partition_that_needs_fsync_makes_the_round_fsync(tmp_path: Path) -> None:
    """Partitions with relaxed flush settings share rounds with strict ones: a round
    holding a batch of a strict one fsyncs, and covers the relaxed ones' writes too."""
    filesystem = CountingFileSystem()
    store = DiskLogStore(str(tmp_path), FakeClock(), filesystem)
    relaxed = await store.open(TopicPartition("relaxed", 0), LogConfig(flush_messages=100), 0)
    strict = await store.open(TopicPartition("strict", 0), LARGE_MEMTABLE, 0)
    await append_durable(relaxed, 1)
    assert filesystem.wal_fsyncs == 0
    relaxed.append(*producer_batch(1))
    await append_durable(strict, 1)
    assert filesystem.wal_fsyncs == 1
    assert relaxed.unsynced_messages == 0
    await store.close()


class GatedFileSystem(CountingFileSystem):
    """Holds one write-ahead log write until released, so a test can append while it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.entered = threading.Event()
        self.released = threading.Event()

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        if self.hold:
            self.hold = False
            self.entered.set()
            self.released.wait(timeout=30)
        super().write(descriptor, data)


async def test_relaxed_flush_counts_messages_appended_during_a_sync(tmp_path: Path) -> None:
    """flush.messages=2: B and C (one record each) arrive after the last fsync, so the
    round that writes C must fsync. B was appended while A's fsync round ran."""
    filesystem = GatedFileSystem()
    settings = StoreSettings(inline_write_max_us=0)  # rounds in a worker thread
    opened = await open_log(tmp_path, LogConfig(flush_messages=2), filesystem, settings=settings)
    log = opened.log
    filesystem.hold = True
    log.append(*producer_batch(2, label="A"))  # two messages: this round syncs
    await asyncio.to_thread(filesystem.entered.wait, 30)
    log.append(*producer_batch(1, label="B"))  # arrives during A's write and fsync
    filesystem.released.set()
    await log.wait_durable(2)
    assert filesystem.data_fsyncs == 1
    await append_durable(log, 1, "C")
    assert filesystem.data_fsyncs == 2, "B's message was dropped from the unsynced count"
    await opened.store.close()


async def test_relaxed_flush_point_survives_power_loss() -> None:
    """On a filesystem that forgets unsynced bytes: once flush.messages is reached, both
    messages survive a power cut, whatever segment they went to."""
    filesystem = SimulatedFileSystem()
    config = LogConfig(flush_messages=2, segment_bytes=1)  # one batch per segment
    store = DiskLogStore("/data", FakeClock(), filesystem)
    log = await store.open(TOPIC_PARTITION, config, 0)
    await append_durable(log, 1, "first")
    await append_durable(log, 1, "second")
    survivor = filesystem.after_power_loss()  # before close, which would sync everything
    await store.close()
    recovered_store = DiskLogStore("/data", FakeClock(), survivor)
    recovered = await recovered_store.open(TOPIC_PARTITION, config, 0)
    assert values_of(await read_everything(recovered)) == [(0, b"first-0"), (1, b"second-0")]
    await recovered_store.close()


async def test_write_failure_fails_waiters_and_later_appends(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    opened = await open_log(tmp_path, filesystem=filesystem)
    log = opened.log
    await append_durable(log, 1)
    filesystem.fail_writes = True
    batch, header = producer_batch(1)
    base_offset = log.append(batch, header)
    with pytest.raises(LogFailed, match="No space"):
        await log.wait_durable(base_offset)
    assert log.high_watermark == 1
    with pytest.raises(LogFailed):
        log.append(*producer_batch(1))
    with pytest.raises(LogFailed):
        await log.wait_durable(5)
    await opened.store.close()


# DiskLogStore: the directory layout of all partitions.


async def test_log_store_opens_gets_and_deletes_partitions(tmp_path: Path) -> None:
    store = DiskLogStore(str(tmp_path), FakeClock())
    first = TopicPartition("events", 0)
    second = TopicPartition("events", 1)
    log = await store.open(first, LARGE_MEMTABLE, 0)
    await store.open(second, LARGE_MEMTABLE, 0)
    assert store.get(first) is log
    assert store.directory_of(first) == os.path.join(str(tmp_path), "logs", "events-0")
    await append_durable(log, 2)
    await store.checkpoint()
    assert segment_files(Path(store.directory_of(first))) == [segment_file_name(0)]
    await store.delete(first)
    assert store.get(first) is None
    assert os.listdir(store.logs_dir) == ["events-1"]  # the other partition stays
    await store.close()
    assert store.get(second) is None


async def test_log_store_reopen_reports_recovered_producer_batches(tmp_path: Path) -> None:
    store = DiskLogStore(str(tmp_path), FakeClock())
    log = await store.open(TOPIC_PARTITION, LARGE_MEMTABLE, 0)
    for count, sequence in ((2, 0), (3, 2)):
        records = [Record(index, 1000, None, b"x") for index in range(count)]
        spec = BatchSpec(producer_id=42, producer_epoch=1, base_sequence=sequence)
        batch = bytearray(build_batch(records, spec))
        base_offset = log.append(batch, validate_produced(batch))
        await log.wait_durable(base_offset + count - 1)
    await store.close()
    seen: list[tuple[int, int, int, int, int]] = []

    def remember(header: BatchHeader) -> None:
        seen.append(
            (
                header.base_offset,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_offset_delta,
            )
        )

    reopened_store = DiskLogStore(str(tmp_path), FakeClock())
    reopened = await reopened_store.open(TOPIC_PARTITION, LARGE_MEMTABLE, 0, remember)
    assert seen == [(0, 42, 1, 0, 1), (2, 42, 1, 2, 2)]
    assert reopened.log_end_offset == 5
    await reopened_store.close()


class SlowFsyncFileSystem(CountingFileSystem):
    """Records which thread ran each fsync of a file holding batches (the write-ahead log,
    or a segment file for a round over one partition); each takes ``delay_s`` longer than
    the disk."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.fsync_threads: list[int] = []

    def fsync(self, descriptor: int) -> None:
        if self._paths[descriptor].endswith((WAL_SUFFIX, SEGMENT_SUFFIX)):
            self.fsync_threads.append(threading.get_ident())
            time.sleep(self.delay_s)
        super().fsync(descriptor)


async def open_inline(tmp_path: Path, filesystem: CountingFileSystem, limit_us: int) -> Opened:
    settings = StoreSettings(inline_write_max_us=limit_us)
    return await open_log(tmp_path, filesystem=filesystem, settings=settings)


async def test_fast_disk_writes_on_the_event_loop(tmp_path: Path) -> None:
    filesystem = SlowFsyncFileSystem(0.0)
    opened = await open_inline(tmp_path, filesystem, 1_000_000)
    filesystem.fsync_threads.clear()  # recovery's own fsync
    for _ in range(5):
        await append_durable(opened.log, 1)
    assert filesystem.fsync_threads == [threading.get_ident()] * 5
    await opened.store.close()


async def test_slow_disk_writes_move_to_a_worker_thread(tmp_path: Path) -> None:
    filesystem = SlowFsyncFileSystem(0.02)  # 20 ms per fsync against a 1 ms limit
    opened = await open_inline(tmp_path, filesystem, 1000)
    filesystem.fsync_threads.clear()
    for _ in range(12):
        await append_durable(opened.log, 1)
    loop_thread = threading.get_ident()
    on_loop = [thread == loop_thread for thread in filesystem.fsync_threads]
    # The first round runs inline and measures 20 ms; later ones go to the worker (the
    # next inline probe is seconds away), and nothing acknowledged skipped its fsync.
    assert on_loop[0] and not any(on_loop[1:])
    assert len(on_loop) == 12
    await opened.store.close()


async def test_inline_writes_can_be_turned_off(tmp_path: Path) -> None:
    filesystem = SlowFsyncFileSystem(0.0)
    opened = await open_inline(tmp_path, filesystem, 0)
    filesystem.fsync_threads.clear()
    for _ in range(3):
        await append_durable(opened.log, 1)
    assert len(filesystem.fsync_threads) == 3
    assert threading.get_ident() not in filesystem.fsync_threads
    await opened.store.close()


async def test_appends_a_few_loop_turns_apart_share_one_inline_fsync(tmp_path: Path) -> None:
    """A client's pipelined requests reach their appends a few loop turns apart (read,
    decode, handle); an inline round waits those turns instead of blocking the loop on
    an fsync that only the first of them could join."""
    filesystem = SlowFsyncFileSystem(0.0)
    opened = await open_inline(tmp_path, filesystem, 1_000_000)
    filesystem.fsync_threads.clear()
    log = opened.log
    acknowledged: list[int] = []

    async def request(turns_before_append: int) -> None:
        for _ in range(turns_before_append):
            await asyncio.sleep(0)
        batch, header = producer_batch(1, label=f"r{turns_before_append}")
        base_offset = log.append(batch, header)
        await log.wait_durable(base_offset)
        acknowledged.append(base_offset)

    await asyncio.gather(*(request(turns) for turns in range(5)))
    assert sorted(acknowledged) == [0, 1, 2, 3, 4]
    assert filesystem.fsync_threads == [threading.get_ident()]  # one round, on the loop
    await append_durable(log, 1)  # a lone append still gets its own round
    assert len(filesystem.fsync_threads) == 2
    await opened.store.close()
