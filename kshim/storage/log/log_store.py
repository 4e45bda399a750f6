"""All partition logs of a broker: segment files under ``{data_dir}/logs/{topic}-{partition}``,
made durable through one write-ahead log under ``{data_dir}/wal``.

The store owns what its partitions share: the write-ahead log and its flush rounds
(group_commit.py: one fsync per round whatever the number of partitions written), the
spills and checkpoints (checkpointer.py), compaction's file work and swaps
(disk_compaction.py), and the bounded set of open files (descriptor_cache.py). Nothing it
holds grows with the number of partitions but a small in-memory index per partition.

Recovery (``recover``) reads the write-ahead log after its checkpoint once, then opens
every partition: its segments as they are on disk, then the batches only the write-ahead
log still held, and starts a checkpoint in the background, after which the next
recovery starts clean.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable, Sequence

from kshim.progress import Progress, to_log
from kshim.protocol.record_batch import BatchHeader
from kshim.storage import interface
from kshim.storage.compaction import CompactionPlan, CompactionRequest, CompactionResult
from kshim.storage.files.filesystem import FileSystem, OsFileSystem
from kshim.storage.interface import (
    Clock,
    LogConfig,
    LogFailed,
    PartitionToOpen,
    StoreSettings,
    TopicPartition,
)
from kshim.storage.log.checkpointer import Checkpointer
from kshim.storage.log.descriptor_cache import DescriptorCache
from kshim.storage.log.disk_compaction import DiskCompaction
from kshim.storage.log.group_commit import GroupCommit
from kshim.storage.log.partition_log import DiskPartitionLog
from kshim.storage.log.recovery import RecoveredLog, recover_segments, replay_logged
from kshim.storage.log.segment import Segment
from kshim.storage.log.segment_writer import SegmentWriter, remove_segment_files
from kshim.storage.log.wal_records import delete_record
from kshim.storage.log.write_ahead_log import WalTail, WriteAheadLog

log = logging.getLogger(__name__)
RECOVERY_PROGRESS_INTERVAL_S = 2.0  # a start that takes longer says how far it is

PARTITION_DIRECTORY = re.compile(r"^.+-\d+$")  # {topic}-{partition}, Kafka's naming


class DiskLogStore:
    """The disk implementation of interface.LogStore. Use from the event loop only."""

    def __init__(
        self,
        data_dir: str,
        clock: Clock,
        filesystem: FileSystem | None = None,
        settings: StoreSettings | None = None,
    ) -> None:
        self.logs_dir = os.path.join(data_dir, "logs")
        self._clock = clock
        self._fs = filesystem or OsFileSystem()
        settings = settings or StoreSettings()
        self.descriptors = DescriptorCache(self._fs, settings.max_open_files)
        self._wal = WriteAheadLog(
            self._fs, os.path.join(data_dir, "wal"), settings.wal_segment_bytes
        )
        self._logs: dict[TopicPartition, DiskPartitionLog] = {}
        self.corrupt_batches = 0  # stored batches reads found damaged (segment_check.py)
        self._tail: WalTail | None = None  # what recovery must replay; None: not read yet
        self._tail_lock = asyncio.Lock()
        self._failure: BaseException | None = None
        self._failed = asyncio.Event()
        self._checkpointer = Checkpointer(
            self._wal, self._fs, self.logs_dir, settings, self._fail, self._checkpoint_limit
        )
        self._compaction = DiskCompaction(
            self._fs, self.descriptors, self._checkpointer.lock, self._memtable_freed
        )
        self._commit = GroupCommit(
            self._wal,
            settings.inline_write_max_us,
            self._after_round,
            self._fail,
            self._checkpointer.wait_for_room,
            self._checkpointer,
        )

    # -- what partition logs ask of their store (partition_log.LogHost) --------------

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def appended(self, log: DiskPartitionLog, size: int) -> None:
        self._checkpointer.appended(log, size)
        self._commit.appended(log)

    def found_corrupt_batch(self) -> None:
        self.corrupt_batches += 1

    def unspilled_changed(self, log: DiskPartitionLog, delta: int) -> None:
        self._checkpointer.unspilled_changed(log, delta)

    async def drop_segments(self, log: DiskPartitionLog, dropped: list[Segment]) -> None:
        # Reads planned over them (and a compaction pass reading them) finish first; only
        # then the lock, which a compaction's swap takes while it holds no pin.
        await log.reads.released([segment.path for segment in dropped])
        async with self._checkpointer.lock:
            await asyncio.to_thread(
                remove_segment_files, self._fs, self.descriptors, log.writer, log.directory, dropped
            )

    async def compact(
        self, log: DiskPartitionLog, plan: CompactionPlan, request: CompactionRequest
    ) -> CompactionResult:
        return await self._compaction.run(log, plan, request)

    def _memtable_freed(self, size: int) -> None:
        self._checkpointer.memtable_bytes -= size

    # -- statistics --------------------------------------------------------------------

    @property
    def sync_count(self) -> int:
        """fsyncs (of files, directories or the whole filesystem) so far."""
        return self._fs.sync_count

    @property
    def wal_bytes_written(self) -> int:
        return self._wal.bytes_written

    @property
    def segment_bytes_written_directly(self) -> int:
        """Bytes of records flush rounds made durable in segment files, not through the
        write-ahead log (a round over one partition: see group_commit.py)."""
        return self._checkpointer.direct_bytes_written

    def observe_rounds(self, observer: Callable[[float, int], None]) -> None:
        """``observer`` is told of each group-commit round: (seconds it took to write and
        sync, batches it made durable)."""
        self._commit.round_observers.append(observer)

    def unobserve_rounds(self, observer: Callable[[float, int], None]) -> None:
        self._commit.round_observers.remove(observer)

    # -- opening and recovery ------------------------------------------------------------

    def directory_of(self, topic_partition: TopicPartition) -> str:
        return os.path.join(self.logs_dir, str(topic_partition))

    async def recover(self, partitions: Sequence[PartitionToOpen]) -> list[DiskPartitionLog]:
        """See interface.LogStore.recover: one worker-thread pass over every partition."""
        tail = await self._read_tail()
        recovered = await asyncio.to_thread(self._recover_all, partitions, tail)
        logs = [
            self._register(spec.topic_partition, spec.config, spec.log_start_offset, result)
            for spec, result in zip(partitions, recovered, strict=True)
        ]
        tail.batches.clear()  # anything left belonged to partitions that are gone
        # In the background: the broker serves meanwhile, and until it is done the write-
        # ahead log keeps what recovery replayed.
        self._checkpointer.request_checkpoint()
        return logs

    async def open(
        self,
        topic_partition: TopicPartition,
        config: LogConfig,
        log_start_offset: int,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> DiskPartitionLog:
        """Opens (recovering) or creates the partition's log and registers it; see
        interface.LogStore.open. Recovery runs in a worker thread."""
        tail = await self._read_tail()
        spec = PartitionToOpen(topic_partition, config, log_start_offset, on_batch)
        recovered = await asyncio.to_thread(self._recover_one, spec, tail)
        return self._register(topic_partition, config, log_start_offset, recovered)

    def get(self, topic_partition: TopicPartition) -> DiskPartitionLog | None:
        """The partition's open log, if any."""
        return self._logs.get(topic_partition)

    async def _read_tail(self) -> WalTail:
        """The write-ahead log after its checkpoint, read once (before the first append)."""
        async with self._tail_lock:
            if self._tail is None:
                self._tail = await asyncio.to_thread(self._wal.recover)
                self._checkpointer.log_recovered()
            return self._tail

    def _recover_all(
        self, partitions: Sequence[PartitionToOpen], tail: WalTail
    ) -> list[RecoveredLog]:
        """Worker thread: deletes what unlisted partitions left, then recovers the others."""
        listed = {str(spec.topic_partition) for spec in partitions}
        self._fs.make_directory(self.logs_dir)
        for name in self._fs.list_directory(self.logs_dir):
            if name not in listed and PARTITION_DIRECTORY.match(name):
                log.warning("%s: no such partition any more; deleting its files", name)
                self._fs.remove_directory(os.path.join(self.logs_dir, name))
        progress = Progress(
            "recovering logs", len(partitions), "partitions", to_log(log),
            RECOVERY_PROGRESS_INTERVAL_S,
        )  # fmt: skip
        try:
            recovered = []
            for spec in partitions:
                recovered.append(self._recover_one(spec, tail))
                progress.advance()
            progress.finish()
            return recovered
        finally:
            self._wal.close_readers()

    def _recover_one(self, spec: PartitionToOpen, tail: WalTail) -> RecoveredLog:
        """Worker thread: the partition's segments, then what only the write-ahead log
        still held for it."""
        directory = self.directory_of(spec.topic_partition)
        recovered = recover_segments(
            self._fs, directory, spec.log_start_offset, self._clock(), spec.on_batch
        )
        logged = tail.batches.pop(spec.topic_partition, [])
        if logged:
            batches = (self._wal.read_batch(batch) for batch in logged)
            replayed = replay_logged(self._fs, recovered, batches, spec.on_batch)
            if replayed:
                log.info("%s: replayed %d batches from the write-ahead log",
                         spec.topic_partition, replayed)  # fmt: skip
        return recovered

    def _register(
        self,
        topic_partition: TopicPartition,
        config: LogConfig,
        log_start_offset: int,
        recovered: RecoveredLog,
    ) -> DiskPartitionLog:
        directory = self.directory_of(topic_partition)
        writer = SegmentWriter(
            self._fs, self.descriptors, directory, recovered.segments, recovered.unindexed
        )
        partition_log = DiskPartitionLog(
            topic_partition, directory, config, self._clock, recovered, log_start_offset,
            self, writer,
        )  # fmt: skip
        if writer.unsynced_paths:
            self._checkpointer.mark_dirty(partition_log)
        self._logs[topic_partition] = partition_log
        return partition_log

    def _checkpoint_limit(self) -> int:
        """How far a checkpoint may go: not past a record of a partition not opened since
        the restart (its batches are only in the write-ahead log)."""
        first = None if self._tail is None else self._tail.first_position()
        return self._wal.end if first is None else first

    # -- deleting and closing --------------------------------------------------------------

    async def delete(self, topic_partition: TopicPartition) -> None:
        """Closes the log and removes its files (in a worker thread).

        A deletion record goes to the write-ahead log, unsynced: records of a partition
        of the same name created later follow it there, so whenever they are durable it
        is too, and recovery never replays the old partition's batches into the new one.
        """
        await self._read_tail()
        partition_log = self._logs.pop(topic_partition, None)
        if partition_log is not None:
            await self._commit.idle()  # its appended batches are written and answered
            partition_log.deleted = True
            self._commit.forget(partition_log)
        assert self._tail is not None
        self._tail.batches.pop(topic_partition, None)
        self._commit.add_record(delete_record(topic_partition))
        async with self._checkpointer.lock:
            if partition_log is not None:
                self._checkpointer.forget(partition_log)
            await asyncio.to_thread(self._remove_directory, self.directory_of(topic_partition))

    async def checkpoint(self) -> None:
        """Spills every durable batch to its segment files and syncs them now, as the
        background checkpoints do (tests and tools; ``close`` does it too). Raises
        LogFailed once a write has failed: nothing is synced any more."""
        await self._commit.idle()
        await self._checkpointer.checkpoint()
        if self._failure is not None:
            raise LogFailed(str(self._failure))

    async def close(self) -> None:
        """Writes pending appends, checkpoints everything, then closes every file (and
        raises the checkpoint's error, if it failed). The store may be opened again (a
        restart: the write-ahead log is read anew)."""
        await self._commit.idle()
        await self._compaction.idle()
        try:
            if self._failure is None and self._tail is not None:
                await self._checkpointer.checkpoint()  # fails the store if it fails
        finally:
            await self._checkpointer.idle()
            # After a failed write nothing is synced again (``_fail``): the log's unsynced
            # records stay for recovery to judge.
            self._wal.close(sync=self._failure is None)
            self.descriptors.close()
            self._logs.clear()
            self._tail = None

    async def write_failed(self) -> BaseException:
        """See interface.LogStore.write_failed."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    def _fail(self, error: BaseException) -> None:
        """A write failed: the store refuses appends until restarted (recovery then finds
        the durable prefix) and syncs nothing more: no flush round or checkpoint starts,
        and a round a worker thread was syncing acknowledges nothing. Never retried:
        after a failed fsync the kernel may have dropped the dirty pages it could not
        write, so a later fsync that succeeds proves nothing about them (PostgreSQL's
        "fsyncgate", docs/references.md)."""
        if self._failure is None:
            log.error("log store: write failed, refusing appends until restarted: %s", error)
            self._failure = error
            self._failed.set()
            self._commit.stop()
            self._checkpointer.stop()
        for partition_log in self._logs.values():
            partition_log.fail(error)

    def _after_round(self, logs: Sequence[DiskPartitionLog], logged_end: int) -> None:
        self._checkpointer.after_round(logs, logged_end)

    def _remove_directory(self, directory: str) -> None:
        """Worker thread: forgets the directory's open files, then removes it."""
        self.descriptors.forget_directory(directory)
        self._fs.remove_directory(directory)


# Checked by mypy: the disk classes implement the protocols the broker relies on.
_DISK_LOG: type[interface.PartitionLog] = DiskPartitionLog
_DISK_STORE: type[interface.LogStore] = DiskLogStore
