"""Spills and checkpoints: durable batches from memory into segment files, and those files
made durable so that the write-ahead log before them can go.

The LSM queue's second half (LSMQ; RocketMQ's ConsumeQueue dispatch): a batch is durable
once a flush round put it in the shared write-ahead log, and sits in its partition's
memtable until it is spilled:

- spill: a partition whose batches not yet spilled pass half its memtable budget
  (``kshim.memtable.bytes``) has them appended to its segment files, unsynced; so do all
  partitions once the store's unspilled bytes pass half its total memtable budget
  (``kshim.memtable.total.bytes``). Many partitions then share one pass, each file
  written once per pass rather than once per flush round.
- checkpoint: once the write-ahead log grew by ``kshim.wal.checkpoint.bytes``, or
  ``kshim.wal.checkpoint.interval.ms`` after a write, everything is spilled, every segment
  file written since the last checkpoint is made durable at once (one syncfs on Linux),
  the batches now durable there are indexed and rolled segments sealed, and the
  checkpoint position is recorded; the log's files before it go. Recovery replays only
  what follows the checkpoint, so its time grows with the unsynced tail, not with the
  number of partitions.
- memory: once the memtables together hold more than the total budget, the least
  recently appended partitions drop their spilled batches (reads then go to the files).

Each job runs its file work in a worker thread, one job at a time, while flush rounds
go on; ``lock`` keeps partition deletions and retention out of a job's way.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kshim.storage.files.filesystem import FileSystem
from kshim.storage.interface import StoreSettings
from kshim.storage.log.partition_log import DiskPartitionLog
from kshim.storage.log.segment_writer import PendingBatch
from kshim.storage.log.write_ahead_log import WriteAheadLog

Spill = list[tuple[DiskPartitionLog, list[PendingBatch]]]


@dataclass(eq=False, slots=True)
class Checkpointer:
    """Spill and checkpoint jobs of one store. Event loop only (jobs use a worker thread)."""

    wal: WriteAheadLog
    filesystem: FileSystem
    logs_dir: str
    settings: StoreSettings
    on_failure: Callable[[BaseException], None]
    checkpoint_limit: Callable[[], int]
    # Held for a job's file work, and by deletions.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    # Logs with unspilled batches.
    _unspilled: dict[DiskPartitionLog, None] = field(default_factory=dict, init=False)
    _unspilled_bytes: int = field(default=0, init=False)
    _spill_due: dict[DiskPartitionLog, None] = field(default_factory=dict, init=False)
    _spill_all: bool = field(default=False, init=False)
    # Logs by last append, least recent first.
    _recent: OrderedDict[DiskPartitionLog, None] = field(default_factory=OrderedDict, init=False)
    memtable_bytes: int = field(default=0, init=False)  # of every log's memtable together
    # Logs spilled since the last checkpoint.
    _dirty: set[DiskPartitionLog] = field(default_factory=set, init=False)
    _last_checkpoint: float = field(default_factory=time.monotonic, init=False)
    # The log's end when the last checkpoint began.
    _last_checkpoint_end: int = field(init=False)
    # Bytes written straight to segment files since then, and over the store's life.
    _direct_bytes: int = field(default=0, init=False)
    direct_bytes_written: int = field(default=0, init=False)
    # The end of the records of every finished flush round: a round still writing has
    # taken its batches, which a checkpoint may not have spilled, so it waits for it.
    _logged_end: int = field(init=False)
    _timer: asyncio.TimerHandle | None = field(default=None, init=False)
    _checkpoint_requested: bool = field(default=False, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _stopped: bool = field(default=False, init=False)  # the store failed: see ``stop``

    def __post_init__(self) -> None:
        self._last_checkpoint_end = self._logged_end = self.wal.end

    def appended(self, log: DiskPartitionLog, size: int) -> None:
        """A batch joined ``log``'s memtable."""
        self.memtable_bytes += size
        self._recent[log] = None
        self._recent.move_to_end(log)

    def log_recovered(self) -> None:
        """The write-ahead log was read (a restart): its end is where rounds go on."""
        self._logged_end = self._last_checkpoint_end = self.wal.end

    def unspilled_changed(self, log: DiskPartitionLog, delta: int) -> None:
        """``log`` has ``delta`` more bytes to spill (a flush round took its batches)."""
        self._unspilled_bytes += delta
        if log.unspilled_bytes and not log.deleted:
            self._unspilled[log] = None

    def after_round(self, logs: Sequence[DiskPartitionLog], logged_end: int) -> None:
        """A flush round made these logs' batches durable, and the write-ahead log holds
        every round's records up to ``logged_end``: spill or checkpoint when due."""
        self._logged_end = logged_end
        for log in logs:
            if log.unspilled_bytes >= log.spill_threshold and not log.deleted:
                self._spill_due[log] = None
        if self._unspilled_bytes >= self.settings.memtable_total_bytes // 2:
            self._spill_all = True
        if self._spill_due or self._spill_all or self._checkpoint_due():
            self._start()
        else:
            self._arm_timer()

    def _arm_timer(self) -> None:
        """A checkpoint kshim.wal.checkpoint.interval.ms from now, unless one is set."""
        if self._timer is None:
            delay_s = self.settings.checkpoint_interval_ms / 1000
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._start)

    def forget(self, log: DiskPartitionLog) -> None:
        """``log`` is being deleted (the caller holds ``lock``)."""
        for registry in (self._unspilled, self._spill_due, self._recent):
            registry.pop(log, None)
        self._unspilled_bytes -= log.unspilled_bytes
        self.memtable_bytes -= log.memtable_bytes
        self._dirty.discard(log)

    async def wait_for_room(self) -> None:
        """Returns at once unless the memtables hold more than their total budget (spills
        fell behind a slow disk); then once the spills under way are done, which holds
        flush rounds, and so producers, back."""
        if self.memtable_bytes > self.settings.memtable_total_bytes:
            await self.idle()

    async def idle(self) -> None:
        """Returns once the job under way, if any, has ended."""
        while self._task is not None:
            await asyncio.shield(self._task)

    def may_write_directly(self, log: DiskPartitionLog) -> bool:
        """Whether a flush round may write ``log``'s new batches straight to its segment
        files (group_commit.py): only when everything it logged before is in them already,
        so the files stay in offset order, and no job is using the files."""
        return not self.lock.locked() and log.unspilled_bytes == 0 and not log.deleted

    def written_directly(self, log: DiskPartitionLog, size: int, end_offset: int) -> None:
        """A flush round wrote ``size`` bytes of ``log`` below ``end_offset`` durably to its
        segment files: the memtable may let them go, and the next checkpoint indexes them,
        due once such writes add up as the write-ahead log's growth would."""
        self._dirty.add(log)
        self._direct_bytes += size
        self.direct_bytes_written += size
        self.memtable_bytes -= log.spilled(end_offset)

    def mark_dirty(self, log: DiskPartitionLog) -> None:
        """``log`` has segment bytes the next checkpoint must sync (recovery replayed
        batches of the write-ahead log into them)."""
        self._dirty.add(log)

    async def checkpoint(self) -> None:
        """Spills everything and makes it durable now (a clean shutdown). A failure fails
        the store, as a background job's does, then is raised: a later checkpoint must not
        sync the same files again and count what the failed sync lost as durable. Does
        nothing once the store has failed."""
        await self.idle()
        if self._stopped:
            return
        try:
            await self._checkpoint()
        except Exception as error:
            self.on_failure(error)
            raise

    def request_checkpoint(self) -> None:
        """Starts a checkpoint in the background as soon as it can (after recovery: what it
        replayed becomes durable in the segment files, and the old log can go)."""
        self._checkpoint_requested = True
        self._start()

    def stop(self) -> None:
        """The store failed: no job starts any more. A checkpoint would sync the segment
        files again after a failed sync, and let the write-ahead log go on the strength
        of a sync that proves nothing about what the failed one lost (log_store.py)."""
        self._stopped = True

    def _start(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _written_since_checkpoint(self) -> int:
        return self._logged_end - self._last_checkpoint_end + self._direct_bytes

    def _checkpoint_due(self) -> bool:
        if self._checkpoint_requested:
            return True
        written = self._written_since_checkpoint()
        if written == 0:
            return False
        grown = written >= self.settings.checkpoint_bytes
        waited_ms = (time.monotonic() - self._last_checkpoint) * 1000
        return grown or waited_ms >= self.settings.checkpoint_interval_ms

    async def _run(self) -> None:
        failed = False
        try:
            while not self._stopped:  # a timer set before the store failed runs no job
                if self._checkpoint_due():
                    await self._checkpoint()
                elif self._spill_due or self._spill_all:
                    await self._spill()
                else:
                    break
        except Exception as error:  # a disk error: the store refuses further appends
            self.on_failure(error)
            failed = True
        finally:
            self._task = None
        # Rounds that ended while this job ran (it cleared their timer, if any) and were
        # not due yet get their checkpoint later: without a next write nothing else would
        # make them durable in the segment files, index them, or seal a rolled segment.
        if not failed and self._written_since_checkpoint() > 0:
            self._arm_timer()

    async def _spill(self) -> None:
        async with self.lock:
            chosen = list(self._unspilled) if self._spill_all else list(self._spill_due)
            spill = self._take(chosen)
            await asyncio.to_thread(_write_spills, spill)
        self._spilled(spill, synced=False)

    async def _checkpoint(self) -> None:
        self._checkpoint_requested = False
        async with self.lock:  # a partition opened meanwhile is in ``dirty`` or the limit
            self._last_checkpoint_end = self._logged_end
            self._direct_bytes = 0
            # Every record before the position belongs to a batch spilled below, except
            # those of partitions not opened since a restart, which hold it back.
            position = min(self._logged_end, self.checkpoint_limit())
            spill = self._take(list(self._unspilled))
            dirty = self._dirty | {log for log, _ in spill}
            self._dirty = set()
            if dirty or position != self.wal.checkpointed:
                await asyncio.to_thread(self._checkpoint_files, spill, dirty, position)
        self._last_checkpoint = time.monotonic()
        self._spilled(spill, synced=True)

    def _take(self, logs: Sequence[DiskPartitionLog]) -> Spill:
        """The unspilled batches of ``logs``, which no longer count as unspilled."""
        spill = []
        for log in logs:
            self._unspilled.pop(log, None)
            self._spill_due.pop(log, None)
            if log.deleted:
                continue
            self._unspilled_bytes -= log.unspilled_bytes
            batches = log.take_unspilled()
            if batches:
                spill.append((log, batches))
        if not self._unspilled:
            self._spill_all = False
        return spill

    def _spilled(self, spill: Spill, synced: bool) -> None:
        """On the loop after a job: the memtables may let spilled batches go; files
        written and not ``synced`` are for the next checkpoint to sync."""
        for log, batches in spill:
            if log.deleted:
                continue
            if not synced:
                self._dirty.add(log)
            _, _, last = batches[-1]
            self.memtable_bytes -= log.spilled(last.base_offset + last.last_offset_delta + 1)
        for log in list(self._recent):
            if self.memtable_bytes <= self.settings.memtable_total_bytes:
                break
            self.memtable_bytes -= log.release_memtable()
            if log.memtable_bytes == 0:
                del self._recent[log]

    def _checkpoint_files(self, spill: Spill, dirty: set[DiskPartitionLog], position: int) -> None:
        """Worker thread: spills, syncs every file written since the last checkpoint,
        indexes and seals what is now durable, then records the checkpoint."""
        _write_spills(spill)
        synced = {log: log.writer.unsynced_paths for log in dirty}
        paths = {path for log_paths in synced.values() for path in log_paths}
        directories = {log.writer.directory for log in dirty} | {self.logs_dir}
        self.filesystem.sync_all(paths, directories)
        for log, log_paths in synced.items():
            log.writer.synced(log_paths)
        self.wal.checkpoint(position)


def _write_spills(spill: Spill) -> None:
    """Worker thread: appends each log's batches to its segment files."""
    for log, batches in spill:
        log.writer.write(batches)
