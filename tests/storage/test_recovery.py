"""recover_segments: rebuilding segment indexes from files, truncating torn tails."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kshim.protocol.record_batch import BatchHeader, read_header
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.files.filesystem import OsFileSystem
from kshim.storage.interface import LogConfig, TopicPartition
from kshim.storage.log.index_file import index_path_for
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.log.recovery import CorruptLog, recover_segments
from kshim.storage.log.sealed_index import sealed_path_for
from kshim.storage.log.segment import Segment, segment_file_name

NOW_MS = 1_234_567


def stored_batch(
    base_offset: int, count: int, timestamp: int = 1000, producer_id: int = -1
) -> bytes:
    """A batch as the log stores it: offsets stamped, CRC intact."""
    records = [
        Record(index, timestamp + index, None, b"value-%d" % index) for index in range(count)
    ]
    spec = BatchSpec()
    if producer_id >= 0:
        spec = BatchSpec(producer_id=producer_id, producer_epoch=0, base_sequence=base_offset)
    batch = bytearray(build_batch(records, spec))
    struct.pack_into(">q", batch, 0, base_offset)  # BaseOffset, as an append stamps it
    return bytes(batch)


def write_segment(directory: Path, base_offset: int, counts: list[int]) -> tuple[bytes, int]:
    """Writes consecutive batches as a segment file (no index); returns (bytes, next offset)."""
    data = b""
    offset = base_offset
    for count in counts:
        data += stored_batch(offset, count, timestamp=10 * offset)
        offset += count
    directory.mkdir(parents=True, exist_ok=True)
    (directory / segment_file_name(base_offset)).write_bytes(data)
    return data, offset


def recover(directory: Path, log_start_offset: int = 0) -> list[Segment]:
    return recover_segments(OsFileSystem(), str(directory), log_start_offset, NOW_MS).segments


def describe(segments: list[Segment]) -> list[tuple[int, int, list[int], list[int], int]]:
    return [
        (
            segment.base_offset,
            segment.next_offset,
            list(segment.batch_offsets),
            list(segment.batch_positions),
            segment.size,
        )
        for segment in segments
    ]


def test_missing_directory_is_created_with_one_empty_segment(tmp_path: Path) -> None:
    directory = tmp_path / "logs" / "t-0"
    segments = recover(directory, log_start_offset=42)
    assert directory.is_dir()
    assert len(segments) == 1
    segment = segments[0]
    assert (segment.base_offset, segment.next_offset, segment.size) == (42, 42, 0)
    assert segment.is_empty
    assert segment.path == str(directory / segment_file_name(42))
    assert segment.created_ms == NOW_MS


def test_segments_are_rebuilt_by_scanning(tmp_path: Path) -> None:
    first, middle = write_segment(tmp_path, 0, [1, 3, 2])
    second, end = write_segment(tmp_path, middle, [4, 1])
    segments = recover(tmp_path)
    first_sizes = [len(stored_batch(0, count)) for count in (1, 3)]
    assert describe(segments) == [
        (0, 6, [0, 1, 4], [0, first_sizes[0], sum(first_sizes)], len(first)),
        (6, 11, [6, 10], [0, len(stored_batch(6, 4))], len(second)),
    ]
    assert end == 11
    assert list(segments[1].batch_max_timestamps) == [63, 100]
    assert segments[1].max_timestamp == 100


def test_unrelated_files_are_ignored(tmp_path: Path) -> None:
    write_segment(tmp_path, 0, [2])
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n")
    (tmp_path / "notes.txt").write_text("x")
    assert [segment.base_offset for segment in recover(tmp_path)] == [0]


def test_recovered_batches_are_reported(tmp_path: Path) -> None:
    _, middle = write_segment(tmp_path, 0, [2, 1])
    write_segment(tmp_path, middle, [3])
    seen: list[tuple[int, int]] = []

    def remember(header: BatchHeader) -> None:
        seen.append((header.base_offset, header.records_count))

    recover_segments(OsFileSystem(), str(tmp_path), 0, NOW_MS, remember)
    assert seen == [(0, 2), (2, 1), (3, 3)]


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\x00", id="one byte"),
        pytest.param(b"\xff" * 60, id="less than a header"),
        pytest.param(b"\x42" * 500, id="garbage"),
        pytest.param(stored_batch(3, 2)[:-1], id="truncated batch"),
        pytest.param(stored_batch(3, 2)[:70], id="truncated after the header"),
        pytest.param(stored_batch(3, 2)[:-1] + bytes([stored_batch(3, 2)[-1] ^ 1]), id="flipped"),
        pytest.param(stored_batch(4, 2), id="wrong base offset"),
        pytest.param(bytes(61), id="zeros"),
    ],
)
def test_torn_tail_of_the_last_segment_is_truncated(tmp_path: Path, tail: bytes) -> None:
    _, middle = write_segment(tmp_path, 0, [2])
    intact, end = write_segment(tmp_path, middle, [1])
    path = tmp_path / segment_file_name(middle)
    with open(path, "ab") as handle:
        handle.write(tail)
    segments = recover(tmp_path)
    assert path.read_bytes() == intact
    assert (segments[-1].next_offset, segments[-1].size) == (end, len(intact))
    assert list(segments[-1].batch_offsets) == [2]


def test_valid_batches_after_a_torn_one_are_dropped_too(tmp_path: Path) -> None:
    good = stored_batch(0, 2)
    damaged = bytearray(stored_batch(2, 2))
    damaged[-3] ^= 0x10
    (tmp_path / segment_file_name(0)).write_bytes(good + bytes(damaged) + stored_batch(4, 1))
    segments = recover(tmp_path)
    assert (tmp_path / segment_file_name(0)).read_bytes() == good
    assert segments[0].next_offset == 2


def test_entirely_torn_last_segment_becomes_empty(tmp_path: Path) -> None:
    _, middle = write_segment(tmp_path, 0, [3])
    (tmp_path / segment_file_name(middle)).write_bytes(stored_batch(middle, 1)[:-4])
    segments = recover(tmp_path)
    assert [(segment.base_offset, segment.next_offset) for segment in segments] == [(0, 3), (3, 3)]
    assert segments[-1].is_empty
    assert (tmp_path / segment_file_name(middle)).stat().st_size == 0


def test_damaged_earlier_segment_is_truncated_and_later_segments_removed(tmp_path: Path) -> None:
    """Only relaxed flush.messages can leave a torn segment before the last one; what
    follows it cannot be trusted to be contiguous, so it goes (module docstring)."""
    first, middle = write_segment(tmp_path, 0, [2, 2])
    write_segment(tmp_path, middle, [1])
    with open(tmp_path / segment_file_name(0), "r+b") as handle:
        handle.seek(len(first) - 1)
        handle.write(bytes([first[-1] ^ 0xFF]))
    segments = recover(tmp_path)
    assert [(segment.base_offset, segment.next_offset) for segment in segments] == [(0, 2)]
    assert sorted(os.listdir(tmp_path)) == [segment_file_name(0)]
    assert (tmp_path / segment_file_name(0)).stat().st_size == len(stored_batch(0, 2))


def test_gap_between_segments_is_corrupt(tmp_path: Path) -> None:
    write_segment(tmp_path, 0, [2])
    write_segment(tmp_path, 5, [1])  # offsets 2-4 are missing
    with pytest.raises(CorruptLog, match="expected 2"):
        recover(tmp_path)


def test_overlapping_segments_are_corrupt(tmp_path: Path) -> None:
    write_segment(tmp_path, 0, [4])
    write_segment(tmp_path, 2, [1])
    with pytest.raises(CorruptLog):
        recover(tmp_path)


# Index files written by a real disk store.

PARTITION = TopicPartition("t", 0)


def partition_directory(data_dir: Path) -> Path:
    return data_dir / "logs" / str(PARTITION)


async def write_log_with_index(data_dir: Path, batches: int) -> list[tuple[int, int, int]]:
    """Appends idempotent batches through a disk store on ``data_dir``, then closes it
    (its checkpoint indexes and seals what it wrote); returns (base, size, max timestamp)."""
    store = DiskLogStore(str(data_dir), lambda: NOW_MS)
    log = await store.open(PARTITION, LogConfig(segment_bytes=400), 0)
    written = []
    for index in range(batches):
        batch = bytearray(stored_batch(0, 2, timestamp=100 * index, producer_id=7))
        header = read_header(batch)
        base_offset = log.append(batch, header)
        await log.wait_durable(base_offset + 1)
        written.append((base_offset, len(batch), header.max_timestamp))
    await store.close()
    return written


def index_files(directory: Path) -> list[Path]:
    """Each segment's index: the mapped sealed index once rolled, else the block index."""
    paths = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            sealed = Path(sealed_path_for(str(directory / name)))
            paths.append(sealed if sealed.exists() else Path(index_path_for(str(directory / name))))
    return paths


@pytest.mark.parametrize(
    "damage", ["intact", "no index", "empty index", "torn index", "index garbage"]
)
async def test_index_damage_never_changes_what_is_recovered(tmp_path: Path, damage: str) -> None:
    written = await write_log_with_index(tmp_path, batches=9)
    tmp_path = partition_directory(tmp_path)
    expected = describe(recover(tmp_path))  # the intact index
    assert [offset for segment in expected for offset in segment[2]] == [
        base for base, _, _ in written
    ]
    assert len(expected) > 1
    for path in index_files(tmp_path):
        assert path.exists()
        if damage == "no index":
            path.unlink()
        elif damage == "empty index":
            path.write_bytes(b"")
        elif damage == "torn index":
            path.write_bytes(path.read_bytes()[:-5])
        elif damage == "index garbage":
            path.write_bytes(b"\x00\x00\x00\x02" + b"\xab" * 40)
    seen: list[int] = []
    recovered = recover_segments(
        OsFileSystem(), str(tmp_path), 0, NOW_MS, lambda header: seen.append(header.base_offset)
    )
    assert describe(recovered.segments) == expected
    assert [list(segment.batch_max_timestamps) for segment in recovered.segments] == [
        [timestamp for base, _, timestamp in written if segment[0] <= base < segment[1]]
        for segment in expected
    ]
    assert seen == [base for base, _, _ in written]  # idempotent batches are all reported


async def test_index_pointing_past_a_shortened_segment_is_not_trusted(tmp_path: Path) -> None:
    written = await write_log_with_index(tmp_path, batches=3)
    tmp_path = partition_directory(tmp_path)
    segment_path = tmp_path / segment_file_name(0)
    data = segment_path.read_bytes()
    last_size = written[-1][1]
    segment_path.write_bytes(data[: len(data) - last_size + 10])  # the last batch is torn
    segments = recover(tmp_path)
    assert segments[-1].next_offset == written[-1][0]
    assert segment_path.stat().st_size == len(data) - last_size


async def test_reopened_log_appends_after_a_recovered_unindexed_tail(tmp_path: Path) -> None:
    """Batches recovered by scanning (no index) are indexed later and survive a second reopen."""
    written = await write_log_with_index(tmp_path, batches=4)
    for path in index_files(partition_directory(tmp_path)):
        path.unlink()
    more = await write_log_with_index(tmp_path, batches=2)
    assert [base for base, _, _ in more] == [8, 10]
    segments = recover(partition_directory(tmp_path))
    assert [offset for segment in segments for offset in segment.batch_offsets] == [
        base for base, _, _ in written + more
    ]
