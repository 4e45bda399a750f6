"""The write-ahead log all partitions share: one sequential file, one fsync per flush round.

An acknowledged batch must be on disk, and one fsync per partition written in a round
costs as many fsyncs as partitions: 1,000 partitions in one produce request took 80 ms
of fsyncs on this project's test machine, one write and fdatasync of the same bytes to
one file 0.5 ms. So, as in LSMQ (the LSM queue: one write-ahead log for every queue,
then per-queue sorted files) and RocketMQ (one CommitLog for every topic), every
appended batch goes to this one log first, and a flush round fsyncs only it. Segment
files get the batches later, unsynced (spilled from the memtables), and are made durable
together at a checkpoint, after which the log before the checkpoint is deleted.

Files are ``{data_dir}/wal/{position:020d}.wal``, named by the position of their first
byte: positions count bytes across all files, so a position names one place in the log.
``checkpoint`` holds the position below which every record is in a segment file on
disk; recovery replays the records after it.

The file written to has its disk blocks allocated ahead of the records, PREALLOCATION_BYTES
at a time (posix_fallocate), so that a flush round's fsync finds the file's size and block
map unchanged and has only the data to write: on this project's test machine (ext4) a
200-byte write and its fsync took 150-190 us (median) appended, 115-140 us over
allocated blocks (Kafka's ``file.preallocate`` allocates segments ahead the same way). The
zeros past the last record read as the log's end: a record's kind is never 0, so
recovery stops there as at a torn record, and cuts the file back to its last record
before writing on. Nothing is allocated past the size at which a file is full, so every
file but the last ends at its last record, and positions stay byte counts.

The records' layout is in wal_records.py.

Methods block on I/O: call them from a worker thread, or from the event loop only where
the caller has measured the disk to be fast (group_commit.py). Not thread-safe: one
caller at a time.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from dataclasses import dataclass, field

from kshim.protocol.checksum import crc32c
from kshim.storage.files.filesystem import FileSystem
from kshim.storage.interface import TopicPartition
from kshim.storage.log.wal_records import (
    DELETE_RECORD,
    RECORD_OVERHEAD,
    WalRecord,
    record_size,
    records,
)

log = logging.getLogger(__name__)

WAL_SUFFIX = ".wal"
CHECKPOINT_NAME = "checkpoint"
DEFAULT_SEGMENT_BYTES = 64 << 20
PREALLOCATION_BYTES = 4 << 20  # allocated ahead at a time (module docstring)
READ_CHUNK_BYTES = 8 << 20

CHECKPOINT = struct.Struct(">qI")  # position, CRC-32C of the position's 8 bytes
_INT64 = struct.Struct(">q")


class CorruptWriteAheadLog(Exception):
    """A damaged record before the log's last file: not a torn tail, and acknowledged data
    may follow it, so kshim refuses to guess what is lost."""


@dataclass(frozen=True, slots=True)
class LoggedBatch:
    """Where a batch recovery found sits: its file, position there and size, and the log
    position of its record."""

    path: str
    position: int
    size: int
    record_position: int


@dataclass(slots=True)
class WalTail:
    """What recovery found after the checkpoint: each partition's batches, in log order."""

    batches: dict[TopicPartition, list[LoggedBatch]] = field(default_factory=dict)

    def first_position(self) -> int | None:
        """The log position of the first record still to replay, if any."""
        firsts = [batches[0].record_position for batches in self.batches.values() if batches]
        return min(firsts, default=None)


@dataclass(frozen=True, slots=True)
class _WalFile:
    start: int  # the position of its first byte
    path: str


class WriteAheadLog:
    def __init__(
        self, filesystem: FileSystem, directory: str, segment_bytes: int = DEFAULT_SEGMENT_BYTES
    ) -> None:
        self._fs = filesystem
        self.directory = directory
        self._segment_bytes = segment_bytes
        self._files: list[_WalFile] = []
        self._files_lock = threading.Lock()  # rounds roll files while a checkpoint deletes
        self._descriptor = -1
        self._readers: dict[str, int] = {}  # recovery's read descriptors, by path
        self._unsynced = False
        self.end = 0  # the position after the last record written
        self._current_start = 0  # the position of the file written to
        self._allocated_end = 0  # the position up to which that file's blocks are allocated
        self.checkpointed = 0  # everything before it is in segment files on disk
        self.bytes_written = 0

    def recover(self) -> WalTail:
        """Reads the checkpoint and every record after it, truncates a torn tail and opens
        the log for appending. Raises CorruptWriteAheadLog for damage before the last file."""
        self._fs.make_directory(self.directory)
        self.checkpointed = self._read_checkpoint()
        names = sorted(name for name in self._fs.list_directory(self.directory)
                       if name.endswith(WAL_SUFFIX))  # fmt: skip
        self._files = [
            _WalFile(int(name[: -len(WAL_SUFFIX)]), os.path.join(self.directory, name))
            for name in names
        ]
        tail = WalTail()
        if not self._files:
            self._start_file(self.checkpointed)
            return tail
        for index, wal_file in enumerate(self._files):
            size = self._fs.size(wal_file.path)
            start = min(max(self.checkpointed - wal_file.start, 0), size)
            valid_end = _scan_file(self._fs, wal_file, start, size, tail)
            last = index == len(self._files) - 1
            if valid_end < size and not last:
                raise CorruptWriteAheadLog(f"{wal_file.path}: damaged record at byte {valid_end}")
            if valid_end < size:
                self._cut_tail(wal_file.path, valid_end, size)
            self.end = wal_file.start + valid_end
        written_to = self._files[-1]
        self._descriptor = self._fs.open_write(written_to.path, self.end - written_to.start)
        self._current_start = self._allocated_end = written_to.start
        self._fs.fsync(self._descriptor)  # what recovery read is durable before it is used
        return tail

    def write(self, parts: list[bytes | memoryview], sync: bool) -> None:
        """Appends records (``batch_record``/``delete_record`` parts) and, if ``sync``,
        makes everything written so far durable; starts a new file once this one is
        over the segment size."""
        if parts:
            size = sum(len(part) for part in parts)
            self._allocate(self.end + size)
            self._fs.write(self._descriptor, parts)
            self.end += size
            self.bytes_written += size
            self._unsynced = True
        if sync:
            self.sync()
        if self.end - self._current_start >= self._segment_bytes:
            self._roll()

    def sync(self) -> None:
        if self._unsynced:
            self._fs.fsync(self._descriptor)
            self._unsynced = False

    def checkpoint(self, position: int) -> None:
        """Records that every record before ``position`` is durable elsewhere, then deletes
        the files wholly before it."""
        data = _INT64.pack(position)
        temporary = os.path.join(self.directory, CHECKPOINT_NAME + ".tmp")
        if self._fs.exists(temporary):
            self._fs.remove(temporary)
        descriptor = self._fs.open_append(temporary)
        try:
            self._fs.write(descriptor, [CHECKPOINT.pack(position, crc32c(data))])
            self._fs.fsync(descriptor)
        finally:
            self._fs.close(descriptor)
        self._fs.rename(temporary, os.path.join(self.directory, CHECKPOINT_NAME))
        # The new checkpoint is durable before the files it makes obsolete go; a removal
        # lost in a crash only leaves a file that recovery skips.
        self._fs.fsync_directory(self.directory)
        self.checkpointed = position
        with self._files_lock:
            obsolete = [
                wal_file
                for wal_file, following in zip(self._files, self._files[1:], strict=False)
                if following.start <= position
            ]
            self._files = self._files[len(obsolete) :]
        self.close_readers()
        for wal_file in obsolete:
            self._fs.remove(wal_file.path)

    def read_batch(self, batch: LoggedBatch) -> bytes:
        """The bytes of a batch recovery found (files stay open until ``close_readers``)."""
        descriptor = self._readers.get(batch.path)
        if descriptor is None:
            descriptor = self._readers[batch.path] = self._fs.open_read(batch.path)
        return self._fs.pread(descriptor, batch.size, batch.position)

    def close_readers(self) -> None:
        readers, self._readers = self._readers, {}
        for descriptor in readers.values():
            self._fs.close(descriptor)

    def close(self, sync: bool = True) -> None:
        """Closes the log's files, first making every record written durable unless
        ``sync`` is false (after a failed write or fsync, which is never retried: see
        log_store.py)."""
        self.close_readers()
        if self._descriptor >= 0:
            if sync:
                self.sync()
            self._fs.close(self._descriptor)
            self._descriptor = -1

    def _read_checkpoint(self) -> int:
        path = os.path.join(self.directory, CHECKPOINT_NAME)
        if not self._fs.exists(path):
            return 0
        descriptor = self._fs.open_read(path)
        try:
            data = self._fs.pread(descriptor, CHECKPOINT.size, 0)
        finally:
            self._fs.close(descriptor)
        if len(data) != CHECKPOINT.size:
            raise CorruptWriteAheadLog(f"{path}: {len(data)} bytes")
        position, crc = CHECKPOINT.unpack(data)
        if crc32c(data[: _INT64.size]) != crc:
            raise CorruptWriteAheadLog(f"{path}: CRC mismatch")
        return int(position)

    def _roll(self) -> None:
        """Closes the full file (durable first: recovery trusts every file but the last
        to end cleanly; no allocated zeros follow its records, see ``_allocate``) and
        starts the next one."""
        self.sync()
        self._fs.close(self._descriptor)
        self._start_file(self.end)

    def _start_file(self, start: int) -> None:
        path = os.path.join(self.directory, f"{start:020d}{WAL_SUFFIX}")
        self._descriptor = self._fs.open_write(path, 0)
        with self._files_lock:
            self._files.append(_WalFile(start, path))
        self._fs.fsync_directory(self.directory)
        self.end = self._current_start = self._allocated_end = start

    def _allocate(self, end: int) -> None:
        """Allocates the file's blocks up to log position ``end`` at least, a
        PREALLOCATION_BYTES step at a time, but never past the size at which the file is
        full (a write past that grows the file as it goes): the file is rolled only once
        its records reach that size, so a full file ends at its last record."""
        if end <= self._allocated_end:
            return
        steps = -(-(end - self._allocated_end) // PREALLOCATION_BYTES)  # rounded up
        target = min(self._allocated_end + steps * PREALLOCATION_BYTES,
                     self._current_start + self._segment_bytes)  # fmt: skip
        if target >= end:
            self._fs.allocate(self._descriptor, target - self._current_start)
            self._allocated_end = target

    def _cut_tail(self, path: str, valid_end: int, size: int) -> None:
        """Truncates the last file after its last intact record: allocated zeros (its
        end, as expected) or a torn record (worth a warning)."""
        descriptor = self._fs.open_read(path)
        try:
            following = self._fs.pread(descriptor, RECORD_OVERHEAD, valid_end)
        finally:
            self._fs.close(descriptor)
        if any(following):
            log.warning("%s: truncating torn tail at byte %d of %d", path, valid_end, size)
        self._fs.truncate(path, valid_end)


def _scan_file(
    filesystem: FileSystem, wal_file: _WalFile, start: int, size: int, tail: WalTail
) -> int:
    """Adds the intact records of [start, size) to ``tail``; returns where they end."""
    descriptor = filesystem.open_read(wal_file.path)
    try:
        position = start
        while position < size:
            chunk = filesystem.pread(descriptor, min(READ_CHUNK_BYTES, size - position), position)
            consumed = 0
            for record_end, record in records(chunk):
                _add(tail, wal_file, position, record)
                consumed = record_end
            if consumed == 0:
                needed = record_size(chunk)
                if needed is None or needed <= len(chunk) or position + needed > size:
                    break
                continue_chunk = filesystem.pread(descriptor, needed, position)
                found = list(records(continue_chunk))
                if not found:
                    break
                _add(tail, wal_file, position, found[0][1])
                consumed = found[0][0]
            position += consumed
        return position
    finally:
        filesystem.close(descriptor)


def _add(tail: WalTail, wal_file: _WalFile, chunk_position: int, record: WalRecord) -> None:
    """``chunk_position``: where the chunk holding the record starts in the file."""
    if record.kind == DELETE_RECORD:
        tail.batches.pop(record.topic_partition, None)
        return
    logged = LoggedBatch(
        wal_file.path,
        chunk_position + record.batch_start,
        record.batch_size,
        wal_file.start + chunk_position + record.start,
    )
    tail.batches.setdefault(record.topic_partition, []).append(logged)
