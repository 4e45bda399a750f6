"""The write-ahead log's files allocated ahead of their records (write_ahead_log.py): the
allocated zeros read as the log's end after a crash, writing goes on right after the last
record, and a full file is cut back to its last record before the next one starts."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kshim.storage.files.filesystem import OsFileSystem
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import TopicPartition
from kshim.storage.log.wal_records import BATCH_RECORD, batch_record, record_prefix
from kshim.storage.log.write_ahead_log import PREALLOCATION_BYTES, WAL_SUFFIX, WriteAheadLog
from tests.storage.test_write_ahead_log import stored

DIRECTORY = "/data/wal"
SEGMENT_BYTES = 2 * PREALLOCATION_BYTES  # files allocated one step ahead at a time
PARTITION = TopicPartition("orders", 0)
PREFIX = record_prefix(BATCH_RECORD, PARTITION)


def append(wal: WriteAheadLog, offset: int) -> None:
    """One batch record for ``offset``, made durable."""
    wal.write([*batch_record(PREFIX, stored(offset, "v"))], True)


def recovered(
    filesystem: SimulatedFileSystem, segment_bytes: int
) -> tuple[WriteAheadLog, list[bytes]]:
    """The log recovered from ``filesystem`` and the batches it found, in order."""
    wal = WriteAheadLog(filesystem, DIRECTORY, segment_bytes)
    tail = wal.recover()
    return wal, [wal.read_batch(batch) for batch in tail.batches.get(PARTITION, [])]


def wal_paths(filesystem: SimulatedFileSystem) -> list[str]:
    names = filesystem.list_directory(DIRECTORY)
    return [os.path.join(DIRECTORY, name) for name in names if name.endswith(WAL_SUFFIX)]


def test_records_are_written_over_blocks_allocated_ahead(tmp_path: Path) -> None:
    wal = WriteAheadLog(OsFileSystem(), str(tmp_path))
    wal.recover()
    append(wal, 0)
    (name,) = [name for name in os.listdir(tmp_path) if name.endswith(WAL_SUFFIX)]
    status = os.stat(tmp_path / name)
    assert wal.end < PREALLOCATION_BYTES == status.st_size
    assert status.st_blocks * 512 >= PREALLOCATION_BYTES  # blocks, not a sparse hole
    wal.close()


def test_after_a_crash_the_allocated_zeros_read_as_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every acknowledged record is found once, quietly (zeros are no torn record), and
    records written after recovery follow the last one, where the next recovery finds
    them: written after the zeros, they would be lost."""
    filesystem = SimulatedFileSystem()
    wal, _ = recovered(filesystem, SEGMENT_BYTES)
    for offset in range(3):
        append(wal, offset)
    written_end = wal.end
    survivor = filesystem.after_power_loss()
    (path,) = wal_paths(survivor)
    assert survivor.size(path) == PREALLOCATION_BYTES > written_end  # the zeros survive

    with caplog.at_level(logging.WARNING):
        wal, found = recovered(survivor, SEGMENT_BYTES)
    assert found == [stored(offset, "v") for offset in range(3)]
    assert wal.end == written_end
    assert not caplog.records
    append(wal, 3)

    _, found = recovered(survivor.after_power_loss(), SEGMENT_BYTES)
    assert found == [stored(offset, "v") for offset in range(4)]


def test_a_torn_record_before_the_zeros_is_cut_off_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    filesystem = SimulatedFileSystem()
    wal, _ = recovered(filesystem, SEGMENT_BYTES)
    append(wal, 0)
    header, batch = batch_record(PREFIX, stored(1, "torn"))
    wal.write([header, batch[: len(batch) // 2]], True)  # what reached the disk of it
    with caplog.at_level(logging.WARNING):
        _, found = recovered(filesystem.after_power_loss(), SEGMENT_BYTES)
    assert found == [stored(0, "v")]
    assert "torn tail" in caplog.text


def test_a_full_file_ends_at_its_last_record() -> None:
    """Recovery refuses damage before the last file; allocated zeros left at the end of a
    full one would be just that."""
    filesystem = SimulatedFileSystem()
    segment_bytes = 1 << 16
    wal, _ = recovered(filesystem, segment_bytes)
    offset = 0
    while len(wal_paths(filesystem)) < 3:
        append(wal, offset)
        offset += 1
    survivor = filesystem.after_power_loss()
    paths = wal_paths(survivor)
    starts = [int(os.path.basename(path)[: -len(WAL_SUFFIX)]) for path in paths]
    for path, start, following in zip(paths, starts, starts[1:], strict=False):
        assert survivor.size(path) == following - start

    _, found = recovered(survivor, segment_bytes)
    assert found == [stored(index, "v") for index in range(offset)]
