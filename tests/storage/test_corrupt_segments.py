"""Segment files damaged on disk while the broker was down: reads answer an error for the
damaged range, never wrong bytes; recovery starts the log anyway.

Each test writes a log through the disk store, closes it (its checkpoint seals every rolled
segment), damages a file as a failing disk would, opens the store again and reads.
"""

from __future__ import annotations

import errno
import logging
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from kshim.protocol.record_batch import LENGTH_OFFSET, RECORDS_OFFSET, crc_of, iter_batches
from kshim.storage.files.filesystem import OsFileSystem
from kshim.storage.interface import (
    CorruptRecords,
    FileRegion,
    LogConfig,
    PartitionLog,
    StorageReadFailed,
)
from kshim.storage.log.index_file import index_path_for
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.log.sealed_index import sealed_path_for
from kshim.testing import FakeClock
from tests.storage.compaction_support import request as compaction_request
from tests.storage.support import TOPIC_PARTITION, UNBOUNDED, append_durable, read_bytes

# Three batches of 87 bytes a segment; the memtable holds nothing, so every read of
# a reopened log goes to the segment files.
CONFIG = LogConfig(segment_bytes=270, memtable_bytes=0)
BATCHES = 9
CORRUPT_LOGGER = "kshim.storage.log.segment_check"


@dataclass
class Written:
    directory: Path
    whole: bytes  # every batch as first read back, in offset order
    batches: list[tuple[int, int]]  # (base offset, size) of each batch
    segments: list[Path]  # segment files, oldest first


async def write_log(data_dir: Path) -> Written:
    store = DiskLogStore(str(data_dir), FakeClock())
    log = await store.open(TOPIC_PARTITION, CONFIG, 0)
    for index in range(BATCHES):
        await append_durable(log, 2, f"v{index}")
    whole = await read_all(log)
    await store.close()
    directory = Path(store.directory_of(TOPIC_PARTITION))
    batches = [(header.base_offset, header.size) for _, header in iter_batches(whole)]
    assert len(batches) == BATCHES
    segments = segment_paths(directory)
    assert len(segments) == 3
    assert [has_sealed_index(path) for path in segments] == [True, True, False]
    return Written(directory, whole, batches, segments)


def segment_paths(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def has_sealed_index(segment: Path) -> bool:
    return Path(sealed_path_for(str(segment))).exists()


def garble_indexes(written: Written) -> None:
    """Every sealed and block index replaced by bytes that fail their CRC."""
    for path in written.segments:
        for index_path in (sealed_path_for(str(path)), index_path_for(str(path))):
            if Path(index_path).exists():
                Path(index_path).write_bytes(b"\x00\x00\x00\x02" + b"\xab" * 60)


async def read_all(log: PartitionLog) -> bytes:
    data, offset = b"", log.log_start_offset
    while offset < log.high_watermark:
        read = await read_bytes(log, offset)
        data, offset = data + read.data, read.end_offset
    return data


def batch_location(written: Written, index: int) -> tuple[Path, int]:
    """The segment file holding batch ``index`` and the batch's position in it."""
    bases = [int(path.name.split(".")[0]) for path in written.segments]
    base_offset = written.batches[index][0]
    segment = max(i for i, base in enumerate(bases) if base <= base_offset)
    first = next(i for i, (offset, _) in enumerate(written.batches) if offset == bases[segment])
    position = sum(size for _, size in written.batches[first:index])
    return written.segments[segment], position


def patch(path: Path, position: int, data: bytes) -> None:
    with path.open("r+b") as handle:
        handle.seek(position)
        handle.write(data)


def flip_record_byte(written: Written, index: int) -> None:
    """A bit flipped inside batch ``index``'s records: its CRC no longer matches."""
    path, position = batch_location(written, index)
    at = position + RECORDS_OFFSET + 3
    byte = path.read_bytes()[at]
    patch(path, at, bytes([byte ^ 0x10]))


def garble_length(written: Written, index: int, length: int) -> None:
    path, position = batch_location(written, index)
    patch(path, position + LENGTH_OFFSET, struct.pack(">i", length))


def batches_between(written: Written, first: int, stop: int) -> bytes:
    start = sum(size for _, size in written.batches[:first])
    end = sum(size for _, size in written.batches[:stop])
    return written.whole[start:end]


async def reopen(data_dir: Path, filesystem: OsFileSystem | None = None) -> DiskLogStore:
    return DiskLogStore(str(data_dir), FakeClock(), filesystem)


async def open_log(store: DiskLogStore) -> PartitionLog:
    return await store.open(TOPIC_PARTITION, CONFIG, 0)


def corrupt_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == CORRUPT_LOGGER]


@pytest.mark.parametrize(
    "damage", ["flipped byte", "length too long", "length too short", "length negative"]
)
async def test_a_damaged_batch_of_a_sealed_segment_is_never_served(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    written = await write_log(tmp_path)
    damaged = 4  # the middle batch of the middle segment
    if damage == "flipped byte":
        flip_record_byte(written, damaged)
    else:
        length = {"length too long": 1 << 30, "length too short": 20, "length negative": -7}
        garble_length(written, damaged, length[damage])
    store = await reopen(tmp_path)
    log = await open_log(store)
    assert log.high_watermark == 2 * BATCHES  # recovery keeps every batch's offsets
    base = written.batches[damaged][0]

    # Read from the segment's first batch: the intact batch before the damage, no further.
    before = await read_bytes(log, base - 2, UNBOUNDED)
    assert before.data == batches_between(written, damaged - 1, damaged)
    assert before.end_offset == base
    for offset in (base, base + 1):
        with pytest.raises(CorruptRecords, match=str(written.segments[1])):
            await log.read(offset, UNBOUNDED)
    # Other segments and the batch after the damaged one are served as written.
    assert (await read_bytes(log, 0)).data == batches_between(written, 0, 3)
    assert (await read_bytes(log, base + 2)).data == batches_between(written, damaged + 1, 6)
    assert (await read_bytes(log, 12)).data == batches_between(written, 6, BATCHES)

    [line] = corrupt_lines(caplog)  # said once for the segment, however often it is read
    assert line.levelno == logging.ERROR
    _, position = batch_location(written, damaged)
    assert str(written.segments[1]) in line.getMessage()
    assert f"byte {position}" in line.getMessage()
    assert store.corrupt_batches == 1
    await store.close()


async def test_a_segment_shorter_than_its_sealed_index_keeps_its_offsets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written = await write_log(tmp_path)
    path, position = batch_location(written, 4)
    with path.open("r+b") as handle:
        handle.truncate(position + 30)  # cut inside batch 4: batch 5 is gone altogether
    store = await reopen(tmp_path)
    log = await open_log(store)
    # Nothing after the short segment is thrown away as a torn tail would be.
    assert (log.log_start_offset, log.high_watermark) == (0, 2 * BATCHES)
    assert segment_paths(written.directory) == written.segments
    assert (await read_bytes(log, 6)).data == batches_between(written, 3, 4)
    for offset in (8, 10):
        with pytest.raises(CorruptRecords):
            await log.read(offset, UNBOUNDED)
    assert (await read_bytes(log, 12)).data == batches_between(written, 6, BATCHES)
    assert any("shorter than its sealed index" in r.getMessage() for r in caplog.records)
    await store.close()


async def test_a_corrupt_index_file_falls_back_to_the_segment_bytes(tmp_path: Path) -> None:
    written = await write_log(tmp_path)
    garble_indexes(written)
    store = await reopen(tmp_path)
    log = await open_log(store)
    assert await read_all(log) == written.whole
    await store.close()


async def test_a_damaged_batch_of_the_active_segment_is_never_served(tmp_path: Path) -> None:
    """The last segment is recovered from its block index, not a sealed one."""
    written = await write_log(tmp_path)
    flip_record_byte(written, 7)
    store = await reopen(tmp_path)
    log = await open_log(store)
    assert log.high_watermark == 2 * BATCHES
    assert (await read_bytes(log, 12)).data == batches_between(written, 6, 7)
    with pytest.raises(CorruptRecords):
        await log.read(14, UNBOUNDED)
    assert (await read_bytes(log, 16)).data == batches_between(written, 8, BATCHES)
    await append_durable(log, 1, "after")  # the log goes on taking appends
    assert log.high_watermark == 2 * BATCHES + 1
    await store.close()


async def test_verified_ranges_are_served_zero_copy(tmp_path: Path) -> None:
    """The first read of a range read back after a restart is checked (and served from the
    bytes checked); later reads of it are file regions again."""
    await write_log(tmp_path)
    store = await reopen(tmp_path)
    log = await open_log(store)
    first = await log.read(6, UNBOUNDED)
    assert [type(chunk) for chunk in first.chunks] == [bytes]
    again = await log.read(6, UNBOUNDED)
    assert [type(chunk) for chunk in again.chunks] == [FileRegion]
    assert again.chunks[0].read_bytes() == first.chunks[0]  # type: ignore[union-attr]
    await store.close()


async def test_batches_appended_since_the_start_are_never_checked(tmp_path: Path) -> None:
    """What this process appended was CRC-checked when produced: reads of it from the
    segment file are zero-copy at once."""
    store = DiskLogStore(str(tmp_path), FakeClock())
    log = await store.open(TOPIC_PARTITION, CONFIG, 0)
    for index in range(4):
        await append_durable(log, 2, f"v{index}")
    await store.checkpoint()
    read = await log.read(0, UNBOUNDED)
    assert read.chunks and all(isinstance(chunk, FileRegion) for chunk in read.chunks)
    for chunk in read.chunks:
        assert isinstance(chunk, FileRegion)
        data = chunk.read_bytes()
        assert all(crc_of(data[p : p + h.size]) == h.crc for p, h in iter_batches(data))
    await store.close()


class FailingReads(OsFileSystem):
    """Reads of one file fail as a dying disk's do (EIO)."""

    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing = failing
        self.failing_descriptors: set[int] = set()

    def open_read(self, path: str) -> int:
        descriptor = super().open_read(path)
        if path == self.failing:
            self.failing_descriptors.add(descriptor)
        return descriptor

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        if descriptor in self.failing_descriptors:
            raise OSError(errno.EIO, "Input/output error")
        return super().pread(descriptor, length, position)


async def test_an_unreadable_segment_is_a_storage_error(tmp_path: Path) -> None:
    written = await write_log(tmp_path)
    store = await reopen(tmp_path, FailingReads(str(written.segments[1])))
    log = await open_log(store)
    with pytest.raises(StorageReadFailed, match="Input/output error"):
        await log.read(6, UNBOUNDED)
    assert (await read_bytes(log, 12)).data == batches_between(written, 6, BATCHES)
    await store.close()


async def test_timestamp_lookups_of_a_damaged_batch_are_refused(tmp_path: Path) -> None:
    written = await write_log(tmp_path)
    flip_record_byte(written, 0)
    store = await reopen(tmp_path)
    log = await open_log(store)
    with pytest.raises(CorruptRecords):
        await log.offset_for_timestamp(0)
    await store.close()


async def test_the_log_cleaner_leaves_a_damaged_segment_alone(tmp_path: Path) -> None:
    """Cleaned, the damaged batch would be rewritten with a fresh CRC, or copied into a
    segment trusted as written by this process."""
    written = await write_log(tmp_path)
    flip_record_byte(written, 4)
    store = await reopen(tmp_path)
    log = await open_log(store)
    with pytest.raises(CorruptRecords, match="the log cleaner leaves"):
        await log.compact(compaction_request())
    assert segment_paths(written.directory) == written.segments  # nothing swapped in
    with pytest.raises(CorruptRecords):
        await log.read(8, UNBOUNDED)
    await store.close()


class CountingReads(OsFileSystem):
    def __init__(self) -> None:
        super().__init__()
        self.preads = 0

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        self.preads += 1
        return super().pread(descriptor, length, position)


async def test_damage_is_logged_once_per_segment_and_never_read_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written = await write_log(tmp_path)
    flip_record_byte(written, 3)
    flip_record_byte(written, 5)  # two damaged batches in the middle segment
    filesystem = CountingReads()
    store = await reopen(tmp_path, filesystem)
    log = await open_log(store)
    for offset in (6, 10):
        with pytest.raises(CorruptRecords):
            await log.read(offset, UNBOUNDED)
    assert store.corrupt_batches == 2
    assert len(corrupt_lines(caplog)) == 1
    preads = filesystem.preads
    for offset in (6, 10):  # known damaged: answered without reading the file again
        with pytest.raises(CorruptRecords):
            await log.read(offset, UNBOUNDED)
    assert filesystem.preads == preads
    assert (await read_bytes(log, 8)).data == batches_between(written, 4, 5)
    assert store.corrupt_batches == 2
    await store.close()
