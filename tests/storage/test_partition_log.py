"""PartitionLog on a real directory: append, read, roll, recover, group commit, lookups."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kshim.protocol.record_batch import (
    BatchHeader,
    iter_batches,
    read_header,
    set_log_append_time,
    validate_produced,
)
from kshim.protocol.records import BatchSpec, Record, build_batch, decode_records
from kshim.storage.filesystem import OsFileSystem
from kshim.storage.interface import LogConfig, OffsetOutOfRange, TopicPartition
from kshim.storage.log_store import LogStore
from kshim.storage.partition_log import LogFailed, PartitionLog
from kshim.storage.segment import SEGMENT_SUFFIX, segment_file_name
from kshim.storage.simulated_filesystem import SimulatedFileSystem
from kshim.storage.timestamp_lookup import offset_for_timestamp, offset_of_max_timestamp

TOPIC_PARTITION = TopicPartition("orders", 0)
UNBOUNDED = 1 << 40
NO_MEMTABLE = LogConfig(memtable_bytes=0)  # every durable batch is read back from disk
LARGE_MEMTABLE = LogConfig(memtable_bytes=1 << 30)


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class CountingFileSystem:
    """Delegates to OsFileSystem and counts the calls that matter for durability.

    ``unsynced`` holds the paths written since their last fsync.
    """

    def __init__(self) -> None:
        self._inner = OsFileSystem()
        self._paths: dict[int, str] = {}
        self.fsyncs = 0
        self.segment_writes = 0
        self.unsynced: set[str] = set()
        self.fail_writes = False

    def open_append(self, path: str) -> int:
        descriptor = self._inner.open_append(path)
        self._paths[descriptor] = path
        return descriptor

    def open_read(self, path: str) -> int:
        return self._inner.open_read(path)

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        if self.fail_writes:
            raise OSError(28, "No space left on device")
        path = self._paths[descriptor]
        if path.endswith(SEGMENT_SUFFIX):
            self.segment_writes += 1
            self.unsynced.add(path)
        self._inner.write(descriptor, data)

    def fsync(self, descriptor: int) -> None:
        self.fsyncs += 1
        self.unsynced.discard(self._paths[descriptor])
        self._inner.fsync(descriptor)

    def fsync_directory(self, path: str) -> None:
        self._inner.fsync_directory(path)

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        return self._inner.pread(descriptor, length, position)

    def __getattr__(self, name: str) -> Any:
        # Anything not counted here (zero-copy regions, ...) goes straight to the real one.
        return getattr(self._inner, name)

    def size(self, path: str) -> int:
        return self._inner.size(path)

    def truncate(self, path: str, length: int) -> None:
        self._inner.truncate(path, length)

    def remove(self, path: str) -> None:
        self._inner.remove(path)

    def list_directory(self, path: str) -> list[str]:
        return self._inner.list_directory(path)

    def make_directory(self, path: str) -> None:
        self._inner.make_directory(path)

    def close(self, descriptor: int) -> None:
        self._paths.pop(descriptor, None)
        self._inner.close(descriptor)


def producer_batch(
    count: int, timestamp: int = 1000, label: str = "v", attributes: int = 0
) -> tuple[bytearray, BatchHeader]:
    """A validated producer batch of ``count`` records, one millisecond apart."""
    records = [
        Record(index, timestamp + index, b"k%d" % index, f"{label}-{index}".encode())
        for index in range(count)
    ]
    batch = bytearray(build_batch(records, BatchSpec(attributes=attributes)))
    return batch, validate_produced(batch)


async def open_log(
    directory: Path,
    config: LogConfig = LARGE_MEMTABLE,
    filesystem: CountingFileSystem | None = None,
    clock: FakeClock | None = None,
    log_start_offset: int = 0,
) -> PartitionLog:
    return await PartitionLog.open(
        TOPIC_PARTITION,
        str(directory),
        config,
        filesystem or CountingFileSystem(),
        clock or FakeClock(),
        log_start_offset,
    )


async def append_durable(
    log: PartitionLog, count: int, label: str = "v", timestamp: int = 1000
) -> int:
    batch, header = producer_batch(count, timestamp, label)
    base_offset = log.append(batch, header)
    await log.wait_durable(base_offset + count - 1)
    return base_offset


def materialize(chunk: object) -> bytes:
    """The bytes of a read chunk: in-memory bytes, or a file region (closed once read)."""
    if isinstance(chunk, bytes | bytearray | memoryview):
        return bytes(chunk)
    descriptor, position, length = chunk.descriptor, chunk.position, chunk.length  # type: ignore[attr-defined]
    try:
        data = os.pread(descriptor, length, position)
    finally:
        chunk.close()  # type: ignore[attr-defined]
    assert len(data) == length
    return data


def joined(chunks: tuple[object, ...]) -> bytes:
    return b"".join(materialize(chunk) for chunk in chunks)


@dataclass(frozen=True)
class Read:
    data: bytes
    end_offset: int


async def read_bytes(
    log: PartitionLog, offset: int, max_bytes: int = UNBOUNDED, upper_offset: int | None = None
) -> Read:
    """One ``PartitionLog.read``, its chunks materialized (and file regions closed)."""
    result = await log.read(offset, max_bytes, upper_offset)
    data = joined(result.chunks)
    assert result.size == len(data)
    return Read(data, result.end_offset)


def batch_bases(data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(data)]


async def read_everything(log: PartitionLog, offset: int | None = None) -> bytes:
    """Reads from ``offset`` (default: log start) to the high watermark, call after call."""
    position = log.log_start_offset if offset is None else offset
    data = b""
    while position < log.high_watermark:
        result = await read_bytes(log, position)
        assert result.end_offset > position
        data += result.data
        position = result.end_offset
    return data


def values_of(data: bytes) -> list[tuple[int, bytes | None]]:
    values = []
    for position, header in iter_batches(data):
        _, records = decode_records(data[position : position + header.size])
        values += [(record.offset, record.value) for record in records]
    return values


def segment_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".log"))


@pytest.fixture(params=[LARGE_MEMTABLE, NO_MEMTABLE], ids=["memtable", "disk"])
def config(request: pytest.FixtureRequest) -> LogConfig:
    return request.param  # type: ignore[no-any-return]


async def test_new_log_is_empty(tmp_path: Path) -> None:
    log = await open_log(tmp_path / "p")
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert await read_bytes(log, 0) == Read(b"", 0)
    assert (tmp_path / "p").is_dir()
    await log.close()


async def test_appends_get_dense_offsets_and_read_back(tmp_path: Path, config: LogConfig) -> None:
    log = await open_log(tmp_path, config)
    bases = [await append_durable(log, count, f"b{count}") for count in (1, 3, 2, 5)]
    assert bases == [0, 1, 4, 6]
    assert log.log_end_offset == log.high_watermark == 11
    data = await read_everything(log)
    assert batch_bases(data) == bases
    assert [offset for offset, _ in values_of(data)] == list(range(11))
    assert values_of(data)[1:4] == [(1, b"b3-0"), (2, b"b3-1"), (3, b"b3-2")]
    await log.close()


async def test_stored_batches_are_stamped_and_still_valid(
    tmp_path: Path, config: LogConfig
) -> None:
    log = await open_log(tmp_path, config)
    await append_durable(log, 2)
    original, header = producer_batch(4, label="x")
    log.append(original, header)
    await log.wait_durable(5)
    stored = (await read_bytes(log, 2)).data
    stored_header = validate_produced(stored)  # CRC still valid after stamping
    assert (stored_header.base_offset, stored_header.partition_leader_epoch) == (2, 0)
    assert stored[12:16] == b"\x00\x00\x00\x00"
    assert stored[16:] == bytes(original[16:])
    await log.close()


async def test_memtable_eviction_serves_reads_from_disk(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    tiny = LogConfig(memtable_bytes=200)  # about two batches
    log = await open_log(tmp_path, tiny, filesystem)
    for index in range(10):
        await append_durable(log, 2, f"n{index}")
    data = await read_everything(log)
    assert [offset for offset, _ in values_of(data)] == list(range(20))
    assert values_of(data)[7] == (7, b"n3-1")
    # The same bytes whether they come from memory or from the segment file.
    assert (tmp_path / segment_file_name(0)).read_bytes() == data
    await log.close()


async def test_read_at_batch_boundaries_and_inside_batches(
    tmp_path: Path, config: LogConfig
) -> None:
    log = await open_log(tmp_path, config)
    for count in (1, 4, 1, 3):  # batches at 0, 1-4, 5, 6-8
        await append_durable(log, count)
    expected = {0: 0, 1: 1, 2: 1, 3: 1, 4: 1, 5: 5, 6: 6, 7: 6, 8: 6}
    for offset, base in expected.items():
        result = await read_bytes(log, offset, 1)  # one batch only
        assert batch_bases(result.data) == [base], offset
        assert result.end_offset == {0: 1, 1: 5, 5: 6, 6: 9}[base]
    last = await read_bytes(log, 8)
    assert batch_bases(last.data) == [6]
    assert last.end_offset == 9
    assert await read_bytes(log, 9) == Read(b"", 9)
    await log.close()


async def test_max_bytes_is_honoured_with_at_least_one_batch(
    tmp_path: Path, config: LogConfig
) -> None:
    log = await open_log(tmp_path, config)
    for _ in range(5):
        await append_durable(log, 2)
    one = len(producer_batch(2)[0])
    for max_bytes in (0, 1, one - 1, one, 2 * one - 1):
        assert len((await read_bytes(log, 0, max_bytes)).data) == one
    two = await read_bytes(log, 0, 2 * one + one // 2)
    assert (len(two.data), two.end_offset) == (2 * one, 4)
    assert batch_bases(two.data) == [0, 2]
    assert (await read_bytes(log, 3, 3 * one)).end_offset == 8
    await log.close()


async def test_upper_offset_bounds_the_read(tmp_path: Path, config: LogConfig) -> None:
    log = await open_log(tmp_path, config)
    for _ in range(4):
        await append_durable(log, 2)  # batches at 0, 2, 4, 6
    bounded = await read_bytes(log, 0, upper_offset=4)
    assert batch_bases(bounded.data) == [0, 2]
    assert bounded.end_offset == 4
    mid = await read_bytes(log, 2, upper_offset=5)  # a batch starting below is whole
    assert batch_bases(mid.data) == [2, 4]
    assert await read_bytes(log, 4, upper_offset=4) == Read(b"", 4)
    capped = await read_bytes(log, 0, upper_offset=1000)  # capped at the high watermark
    assert capped.end_offset == 8
    await log.close()


async def test_offset_out_of_range(tmp_path: Path, config: LogConfig) -> None:
    log = await open_log(tmp_path, config)
    for _ in range(3):
        await append_durable(log, 2)
    with pytest.raises(OffsetOutOfRange):
        await log.read(7, UNBOUNDED)
    with pytest.raises(OffsetOutOfRange):
        await log.read(-1, UNBOUNDED)
    log.advance_log_start_offset(3)
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRange):
        await log.read(2, UNBOUNDED)
    result = await read_bytes(log, 3)  # the batch holding the log start offset
    assert batch_bases(result.data) == [2, 4]
    log.advance_log_start_offset(1)  # never backwards
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRange):
        log.advance_log_start_offset(7)
    await log.close()


async def test_high_watermark_waits_for_the_write(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    advanced: list[int] = []
    log.listeners.append(lambda: advanced.append(log.high_watermark))
    batch, header = producer_batch(3)
    assert log.append(batch, header) == 0
    assert (log.log_end_offset, log.high_watermark) == (3, 0)
    assert await read_bytes(log, 0) == Read(b"", 0)  # not durable yet: invisible
    with pytest.raises(OffsetOutOfRange):
        await log.read(1, UNBOUNDED)
    await log.wait_durable(2)
    assert log.high_watermark == 3
    assert advanced == [3]
    await log.wait_durable(0)  # already durable: returns at once
    await log.close()


async def test_listeners_hear_of_durable_data_before_the_producers(tmp_path: Path) -> None:
    """Long-polling fetches (listeners) are woken before the appends' acknowledgements, so
    the consumer's answer is not queued behind the producer's."""
    log = await open_log(tmp_path)
    woken: list[str] = []
    fetch_wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    log.listeners.append(lambda: fetch_wake.done() or fetch_wake.set_result(None))

    async def fetch() -> None:
        await fetch_wake
        woken.append("fetch")

    async def produce() -> None:
        batch, header = producer_batch(3)
        log.append(batch, header)
        await log.wait_durable(2)
        woken.append("acknowledgement")

    await asyncio.wait_for(asyncio.gather(fetch(), produce()), 10)
    assert woken == ["fetch", "acknowledgement"]
    await log.close()


async def test_segment_roll_by_size(tmp_path: Path) -> None:
    one = len(producer_batch(2, label="r0")[0])
    config = LogConfig(segment_bytes=3 * one, memtable_bytes=0)
    log = await open_log(tmp_path, config)
    for index in range(10):
        await append_durable(log, 2, f"r{index}")
    assert segment_files(tmp_path) == [segment_file_name(base) for base in (0, 6, 12, 18)]
    assert [segment.base_offset for segment in log.segments] == [0, 6, 12, 18]
    # Rolled segments, once durable, are sealed: their index is a mapped file.
    assert [segment.sealed for segment in log.segments] == [True, True, True, False]
    assert all((tmp_path / name).stat().st_size <= 3 * one for name in segment_files(tmp_path))
    data = await read_everything(log)
    assert [offset for offset, _ in values_of(data)] == list(range(20))
    assert values_of(data)[13] == (13, b"r6-1")
    # A read stops at the end of its segment; the next read continues in the following one.
    first = await read_bytes(log, 4)
    assert (batch_bases(first.data), first.end_offset) == ([4], 6)
    second = await read_bytes(log, first.end_offset)
    assert batch_bases(second.data) == [6, 8, 10]
    await log.close()


async def test_oversized_batch_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    log = await open_log(tmp_path, LogConfig(segment_bytes=100, memtable_bytes=0))
    for _ in range(3):
        await append_durable(log, 5)  # each batch is larger than segment_bytes
    assert segment_files(tmp_path) == [segment_file_name(base) for base in (0, 5, 10)]
    assert [offset for offset, _ in values_of(await read_everything(log))] == list(range(15))
    await log.close()


async def test_segment_roll_by_age(tmp_path: Path) -> None:
    clock = FakeClock()
    log = await open_log(tmp_path, LogConfig(segment_ms=1000), clock=clock)
    await append_durable(log, 1)
    clock.now_ms += 999
    await append_durable(log, 1)
    assert len(log.segments) == 1
    clock.now_ms += 1
    await append_durable(log, 1)
    assert segment_files(tmp_path) == [segment_file_name(0), segment_file_name(2)]
    assert log.segments[-1].created_ms == clock.now_ms
    await log.close()


async def test_reopen_recovers_identical_offsets_and_bytes(tmp_path: Path) -> None:
    one = len(producer_batch(3, label="o0")[0])
    config = LogConfig(segment_bytes=2 * one, memtable_bytes=0)
    log = await open_log(tmp_path, config)
    for index in range(7):
        await append_durable(log, 3, f"o{index}")
    before = await read_everything(log)
    await log.close()

    reopened = await open_log(tmp_path, config)
    assert (reopened.log_end_offset, reopened.high_watermark) == (21, 21)
    assert [segment.base_offset for segment in reopened.segments] == [0, 6, 12, 18]
    assert await read_everything(reopened) == before
    assert await append_durable(reopened, 1, "after") == 21
    assert values_of(await read_everything(reopened, 21)) == [(21, b"after-0")]
    await reopened.close()


async def test_reopen_keeps_a_stored_log_start_offset(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    for _ in range(3):
        await append_durable(log, 2)
    await log.close()
    reopened = await open_log(tmp_path, log_start_offset=4)
    assert reopened.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange):
        await reopened.read(3, UNBOUNDED)
    await reopened.close()


async def test_empty_log_starts_at_its_log_start_offset(tmp_path: Path) -> None:
    log = await open_log(tmp_path, log_start_offset=100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert await append_durable(log, 2) == 100
    assert segment_files(tmp_path) == [segment_file_name(100)]
    await log.close()


async def test_close_writes_pending_batches(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    for _ in range(3):
        batch, header = producer_batch(2)
        log.append(batch, header)
    await log.close()  # no wait_durable: close must still write them
    reopened = await open_log(tmp_path)
    assert reopened.log_end_offset == 6
    assert batch_bases(await read_everything(reopened)) == [0, 2, 4]
    await reopened.close()


def append_to_file(path: Path, data: bytes) -> None:
    """Simulates a torn write at the end of a segment file (the log is closed)."""
    with path.open("ab") as handle:
        handle.write(data)


def stamped_batch(base_offset: int, count: int) -> bytearray:
    batch, _ = producer_batch(count, label="torn")
    batch[0:8] = base_offset.to_bytes(8, "big")
    return batch


@pytest.mark.parametrize("damage", ["garbage", "short garbage", "truncated batch", "flipped byte"])
async def test_torn_tail_is_truncated_on_reopen(tmp_path: Path, damage: str) -> None:
    log = await open_log(tmp_path, LogConfig(memtable_bytes=0))
    for index in range(4):
        await append_durable(log, 2, f"ok{index}")
    intact = await read_everything(log)
    await log.close()

    tail = {
        "garbage": b"\x5a" * 200,
        "short garbage": b"\x00\x01\x02",
        "truncated batch": bytes(stamped_batch(8, 3)[:-5]),
        "flipped byte": bytes(stamped_batch(8, 3)[:-1]) + bytes([stamped_batch(8, 3)[-1] ^ 0x01]),
    }[damage]
    path = tmp_path / segment_file_name(0)
    append_to_file(path, tail)

    reopened = await open_log(tmp_path, LogConfig(memtable_bytes=0))
    assert path.stat().st_size == len(intact)
    assert (reopened.log_end_offset, reopened.high_watermark) == (8, 8)
    assert await read_everything(reopened) == intact
    assert await append_durable(reopened, 3, "new") == 8
    assert await append_durable(reopened, 1, "newer") == 11
    values = values_of(await read_everything(reopened))
    assert [offset for offset, _ in values] == list(range(12))
    assert values[8:] == [(8, b"new-0"), (9, b"new-1"), (10, b"new-2"), (11, b"newer-0")]
    await reopened.close()


async def test_torn_tail_in_the_last_of_several_segments(tmp_path: Path) -> None:
    one = len(producer_batch(2)[0])
    config = LogConfig(segment_bytes=2 * one, memtable_bytes=0)
    log = await open_log(tmp_path, config)
    for _ in range(5):
        await append_durable(log, 2)  # segments at 0, 4, 8
    await log.close()
    append_to_file(tmp_path / segment_file_name(8), bytes(stamped_batch(10, 2))[:-1])
    reopened = await open_log(tmp_path, config)
    assert reopened.log_end_offset == 10
    assert await append_durable(reopened, 2) == 10
    assert batch_bases(await read_everything(reopened)) == [0, 2, 4, 6, 8, 10]
    await reopened.close()


async def test_group_commit_shares_fsyncs(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    log = await open_log(tmp_path, filesystem=filesystem)
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
    assert 1 <= filesystem.fsyncs <= rounds < appends
    assert len(values_of(await read_everything(log))) == appends
    await log.close()


async def test_each_acknowledgement_is_preceded_by_an_fsync(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    log = await open_log(tmp_path, filesystem=filesystem)
    for index in range(4):
        await append_durable(log, 1)
        assert filesystem.fsyncs == index + 1
    await log.close()


async def test_relaxed_flush_messages_skips_fsyncs(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    log = await open_log(tmp_path, LogConfig(flush_messages=3), filesystem)
    for _ in range(9):
        await append_durable(log, 1)  # acknowledged after the write, not the fsync
    assert log.high_watermark == 9
    assert filesystem.segment_writes == 9
    assert filesystem.fsyncs == 3  # after messages 3, 6 and 9
    assert len(values_of(await read_everything(log))) == 9
    await log.close()


async def test_relaxed_flush_counts_records_not_batches(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    log = await open_log(tmp_path, LogConfig(flush_messages=4), filesystem)
    await append_durable(log, 3)
    assert filesystem.fsyncs == 0
    await append_durable(log, 2)
    assert filesystem.fsyncs == 1
    await log.close()


async def test_relaxed_flush_ms_bounds_unsynced_time(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    clock = FakeClock()
    log = await open_log(tmp_path, LogConfig(flush_messages=1000, flush_ms=100), filesystem, clock)
    await append_durable(log, 1)
    clock.now_ms += 99
    await append_durable(log, 1)
    assert filesystem.fsyncs == 0
    clock.now_ms += 1
    await append_durable(log, 1)
    assert filesystem.fsyncs == 1
    clock.now_ms += 50
    await append_durable(log, 1)
    assert filesystem.fsyncs == 1  # the timer restarted at the last fsync
    await log.close()


class GatedFileSystem(CountingFileSystem):
    """Holds one segment write until released, so a test can append while it runs."""

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
    log = await open_log(tmp_path, LogConfig(flush_messages=2), filesystem)
    filesystem.hold = True
    log.append(*producer_batch(2, label="A"))  # two messages: this round syncs
    await asyncio.to_thread(filesystem.entered.wait, 30)
    log.append(*producer_batch(1, label="B"))  # arrives during A's write and fsync
    filesystem.released.set()
    await log.wait_durable(2)
    assert filesystem.fsyncs == 1
    await append_durable(log, 1, "C")
    assert filesystem.fsyncs == 2, "B's message was dropped from the unsynced count"
    await log.close()


async def test_relaxed_flush_syncs_sealed_segments_too(tmp_path: Path) -> None:
    """When flush.messages is reached, every segment written since the last fsync must be
    synced, not just the ones written in this round."""
    filesystem = CountingFileSystem()
    config = LogConfig(flush_messages=2, segment_bytes=1)  # one batch per segment
    log = await open_log(tmp_path, config, filesystem)
    await append_durable(log, 1)  # segment 0, not synced (1 message)
    await append_durable(log, 1)  # segment 1, the second message: fsync
    assert filesystem.fsyncs >= 1
    assert filesystem.unsynced == set(), "a sealed segment was never fsynced"
    await log.close()


async def test_relaxed_flush_point_survives_power_loss() -> None:
    """The same as above on a filesystem that forgets unsynced bytes: after the flush
    point both messages must survive a power cut."""
    filesystem = SimulatedFileSystem()
    config = LogConfig(flush_messages=2, segment_bytes=1)
    log = await PartitionLog.open(TOPIC_PARTITION, "/data/t-0", config, filesystem, FakeClock(), 0)
    await append_durable(log, 1, "first")
    await append_durable(log, 1, "second")
    survivor = filesystem.after_power_loss()  # before close, which would sync everything
    await log.close()
    recovered = await PartitionLog.open(
        TOPIC_PARTITION, "/data/t-0", config, survivor, FakeClock(), 0
    )
    assert values_of(await read_everything(recovered)) == [(0, b"first-0"), (1, b"second-0")]
    await recovered.close()


async def test_write_failure_fails_waiters_and_later_appends(tmp_path: Path) -> None:
    filesystem = CountingFileSystem()
    log = await open_log(tmp_path, filesystem=filesystem)
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
    await log.close()


# Timestamp lookups (ListOffsets) over memory and disk.


async def log_with_timestamps(directory: Path, config: LogConfig) -> PartitionLog:
    """Batches at 0 (ts 1000-1002), 3 (ts 500-501), 5 (ts 2000-2003), 9 (ts 1500)."""
    log = await open_log(directory, config)
    for count, timestamp in ((3, 1000), (2, 500), (4, 2000), (1, 1500)):
        await append_durable(log, count, timestamp=timestamp)
    return log


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        (0, (0, 1000)),
        (1000, (0, 1000)),
        (1001, (1, 1001)),  # inside the first batch: record granularity
        (1002, (2, 1002)),
        (1003, (5, 2000)),  # the first offset stamped at or after, not the nearest
        (1500, (5, 2000)),
        (2002, (7, 2002)),
        (2003, (8, 2003)),
        (2004, None),
    ],
)
async def test_offset_for_timestamp(
    tmp_path: Path, config: LogConfig, timestamp: int, expected: tuple[int, int] | None
) -> None:
    log = await log_with_timestamps(tmp_path, config)
    assert await offset_for_timestamp(log, timestamp) == expected
    await log.close()


async def test_offset_for_timestamp_across_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1, memtable_bytes=0)  # one batch per segment
    log = await log_with_timestamps(tmp_path, config)
    assert len(log.segments) == 4
    assert await offset_for_timestamp(log, 1800) == (5, 2000)
    assert await offset_for_timestamp(log, 501) == (0, 1000)
    await log.close()


async def test_offset_for_timestamp_skips_records_below_log_start(tmp_path: Path) -> None:
    log = await log_with_timestamps(tmp_path, LARGE_MEMTABLE)
    log.advance_log_start_offset(2)
    assert await offset_for_timestamp(log, 0) == (2, 1002)
    log.advance_log_start_offset(3)
    assert await offset_for_timestamp(log, 1000) == (5, 2000)
    await log.close()


async def test_offset_for_timestamp_ignores_batches_not_yet_durable(tmp_path: Path) -> None:
    log = await log_with_timestamps(tmp_path, LARGE_MEMTABLE)
    batch, header = producer_batch(1, timestamp=9000)
    log.append(batch, header)
    assert await offset_for_timestamp(log, 9000) is None
    assert await offset_of_max_timestamp(log) == (8, 2003)
    await log.wait_durable(10)
    assert await offset_for_timestamp(log, 9000) == (10, 9000)
    assert await offset_of_max_timestamp(log) == (10, 9000)
    await log.close()


async def test_offset_of_max_timestamp(tmp_path: Path, config: LogConfig) -> None:
    log = await log_with_timestamps(tmp_path, config)
    assert await offset_of_max_timestamp(log) == (8, 2003)
    await log.close()


async def test_offset_of_max_timestamp_prefers_the_earliest(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    for timestamp in (100, 700, 300, 700):
        await append_durable(log, 1, timestamp=timestamp)
    assert await offset_of_max_timestamp(log) == (1, 700)
    await log.close()


async def test_timestamp_lookups_on_an_empty_log(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    assert await offset_for_timestamp(log, 0) is None
    assert await offset_of_max_timestamp(log) is None
    await log.close()


async def test_log_append_time_batches_are_found_by_append_time(tmp_path: Path) -> None:
    log = await open_log(tmp_path, NO_MEMTABLE)
    batch, header = producer_batch(3, timestamp=10)
    set_log_append_time(batch, 5000)
    log.append(batch, read_header(batch))
    await log.wait_durable(2)
    assert await offset_for_timestamp(log, 11) == (0, 5000)
    assert await offset_of_max_timestamp(log) == (0, 5000)
    assert header.records_count == 3
    await log.close()


# LogStore: the directory layout of all partitions.


async def test_log_store_opens_gets_and_deletes_partitions(tmp_path: Path) -> None:
    store = LogStore(str(tmp_path), FakeClock())
    first = TopicPartition("events", 0)
    second = TopicPartition("events", 1)
    log = await store.open(first, LARGE_MEMTABLE, 0)
    await store.open(second, LARGE_MEMTABLE, 0)
    assert store.get(first) is log
    assert store.directory_of(first) == os.path.join(str(tmp_path), "logs", "events-0")
    await append_durable(log, 2)
    assert segment_files(Path(store.directory_of(first))) == [segment_file_name(0)]
    await store.delete(first)
    assert store.get(first) is None
    assert os.listdir(store.logs_dir) == ["events-1"]  # the other partition stays
    await store.close()
    assert store.get(second) is None


async def test_log_store_reopen_reports_recovered_producer_batches(tmp_path: Path) -> None:
    store = LogStore(str(tmp_path), FakeClock())
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

    reopened_store = LogStore(str(tmp_path), FakeClock())
    reopened = await reopened_store.open(TOPIC_PARTITION, LARGE_MEMTABLE, 0, remember)
    assert seen == [(0, 42, 1, 0, 1), (2, 42, 1, 2, 2)]
    assert reopened.log_end_offset == 5
    await reopened_store.close()


class SlowFsyncFileSystem(CountingFileSystem):
    """Records which thread ran each fsync; each takes ``delay_s`` longer than the disk."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.fsync_threads: list[int] = []

    def fsync(self, descriptor: int) -> None:
        self.fsync_threads.append(threading.get_ident())
        time.sleep(self.delay_s)
        super().fsync(descriptor)


async def test_fast_disk_writes_on_the_event_loop(tmp_path: Path) -> None:
    filesystem = SlowFsyncFileSystem(0.0)
    log = await open_log(tmp_path, LogConfig(inline_write_max_us=1_000_000), filesystem)
    for _ in range(5):
        await append_durable(log, 1)
    assert filesystem.fsync_threads == [threading.get_ident()] * 5
    await log.close()


async def test_slow_disk_writes_move_to_a_worker_thread(tmp_path: Path) -> None:
    filesystem = SlowFsyncFileSystem(0.02)  # 20 ms per fsync against a 1 ms limit
    log = await open_log(tmp_path, LogConfig(inline_write_max_us=1000), filesystem)
    for _ in range(12):
        await append_durable(log, 1)
    loop_thread = threading.get_ident()
    on_loop = [thread == loop_thread for thread in filesystem.fsync_threads]
    # The first round runs inline and measures 20 ms; later ones go to the worker (the
    # next inline probe is seconds away), and nothing acknowledged skipped its fsync.
    assert on_loop[0] and not any(on_loop[1:])
    assert len(on_loop) == 12
    await log.close()


async def test_inline_writes_can_be_turned_off(tmp_path: Path) -> None:
    filesystem = SlowFsyncFileSystem(0.0)
    log = await open_log(tmp_path, LogConfig(inline_write_max_us=0), filesystem)
    for _ in range(3):
        await append_durable(log, 1)
    assert threading.get_ident() not in filesystem.fsync_threads
    await log.close()


async def test_appends_a_few_loop_turns_apart_share_one_inline_fsync(tmp_path: Path) -> None:
    """A client's pipelined requests reach their appends a few loop turns apart (read,
    decode, handle); an inline round waits those turns instead of blocking the loop on
    an fsync that only the first of them could join."""
    filesystem = SlowFsyncFileSystem(0.0)
    log = await open_log(tmp_path, LogConfig(inline_write_max_us=1_000_000), filesystem)
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
    await log.close()
