"""Flush rounds: every partition's new batches to the write-ahead log, one fsync for all.

One task writes, round after round, every batch appended since the previous round, in
whatever partitions, as records of the shared write-ahead log, and fsyncs it once; then
each partition's high watermark advances past what the round covered (group commit:
every append made before a round's turn, or while the previous fsync ran, shares the
next one). A produce request touching 1,000 partitions thus costs one fsync, not 1,000.

A round that has batches of one partition only (a single busy partition, or one producer
at a time) writes them straight to that partition's segment files and fsyncs those
instead: logging them first would write every byte twice (docs/design.md, "Where the CPU
goes, and why"). Recovery
needs nothing more for them (recovery.py scans a segment's bytes past its index), as long
as the partition's earlier batches are in its files before them (``may_write_directly``).

A round runs on the event loop itself while the disk answers fast, otherwise in a worker
thread (see ``_write_inline``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from kshim.storage.log.partition_log import DiskPartitionLog
from kshim.storage.log.wal_records import batch_record
from kshim.storage.log.write_ahead_log import WriteAheadLog

PROBE_INTERVAL_S = 5.0  # how often a slow disk gets an inline round to re-measure it
# A pipelined request is about three loop turns from its append (read, decode, handle).
MIN_GATHER_TURNS, MAX_GATHER_TURNS = 3, 12


class DirectWrites(Protocol):
    """What a round writing one partition's segment files asks of the store's spills and
    checkpoints (checkpointer.py)."""

    lock: asyncio.Lock

    def may_write_directly(self, log: DiskPartitionLog) -> bool: ...

    def written_directly(self, log: DiskPartitionLog, size: int, end_offset: int) -> None: ...


@dataclass(eq=False, slots=True)
class GroupCommit:
    """The flush rounds of one store. Event loop only (rounds may use a worker thread).
    ``before_round`` may hold a round back (while spills catch up with memory)."""

    wal: WriteAheadLog
    inline_write_max_us: int
    after_round: Callable[[list[DiskPartitionLog], int], None]  # logs, logged end
    on_failure: Callable[[BaseException], None]
    before_round: Callable[[], Awaitable[None]]
    direct: DirectWrites
    # Logs with unlogged batches, in order.
    _waiting: dict[DiskPartitionLog, None] = field(default_factory=dict, init=False)
    # Written in rounds that skipped fsync.
    _unsynced: set[DiskPartitionLog] = field(default_factory=set, init=False)
    # Records of the store's own (deletions).
    _extra_records: list[bytes] = field(default_factory=list, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _stopped: bool = field(default=False, init=False)  # the store failed: see ``stop``
    # Batches appended so far (how a loop turn shows it brought more).
    _appends: int = field(default=0, init=False)
    # Moving average of an inline round's write and fsync, and time.monotonic() of the last.
    _inline_write_us: float = field(default=0.0, init=False)
    _last_inline_write: float = field(default=0.0, init=False)
    # Told of each round: (seconds to write and sync it, batches it made durable).
    round_observers: list[Callable[[float, int], None]] = field(default_factory=list, init=False)

    def appended(self, log: DiskPartitionLog) -> None:
        """``log`` has a batch for the next round."""
        self._waiting[log] = None
        self._appends += 1
        self._start()

    def add_record(self, record: bytes) -> None:
        """A record of the store's own for the next round (it never waits for durability:
        the log's order alone makes it count, see log_store.py)."""
        self._extra_records.append(record)
        self._start()

    def forget(self, log: DiskPartitionLog) -> None:
        """``log`` is being deleted: its waiting batches are not written."""
        self._waiting.pop(log, None)
        self._unsynced.discard(log)

    def stop(self) -> None:
        """The store failed: no round starts any more, and one a worker thread is writing
        acknowledges nothing when it returns. After a failed write or fsync, one that
        succeeds later proves nothing about what the failed one lost (log_store.py)."""
        self._stopped = True

    async def idle(self) -> None:
        """Returns once every round started so far has ended."""
        while self._task is not None:
            await asyncio.shield(self._task)

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._gather_appends()
            while self._waiting or self._extra_records:
                await self.before_round()
                if self._stopped:
                    break
                started = time.perf_counter()
                batches = await self._round()
                for observe in self.round_observers:
                    observe(time.perf_counter() - started, batches)
        except Exception as error:  # a disk error: the store refuses further appends
            self.on_failure(error)
        finally:
            self._task = None

    async def _round(self) -> int:
        """Writes (and, when due, syncs) what is waiting; returns how many batches."""
        if len(self._waiting) == 1 and not self._extra_records:
            (log,) = self._waiting
            # Unsynced records in the write-ahead log (flush.messages > 1) wait for a
            # round that syncs it; a round that only syncs segment files would not.
            if not self._unsynced and log.sync_due() and self.direct.may_write_directly(log):
                async with self.direct.lock:  # free: taken without waiting
                    return await self._round_to_segments(log)
        logs = list(self._waiting)
        self._waiting.clear()
        parts: list[bytes | memoryview] = list(self._extra_records)
        self._extra_records = []
        targets = []
        batches = 0
        for log in logs:
            unlogged = log.take_unlogged()
            batches += len(unlogged)
            for _, data, _ in unlogged:
                parts += batch_record(log.wal_prefix, data)
            targets.append(log.log_end_offset)
        self._unsynced.update(logs)
        sync = any(log.sync_due() for log in self._unsynced)
        # Appends arriving during this round count towards the next fsync.
        covered = {log: log.unsynced_messages for log in self._unsynced} if sync else {}
        if self._write_inline():
            self._write_on_loop(parts, sync)
        else:
            await asyncio.to_thread(self.wal.write, parts, sync)
            # A checkpoint may have failed the store meanwhile. (A round to segment files
            # cannot overlap one: both hold the checkpointer's lock.)
            if self._stopped:
                return 0
        for log, messages in covered.items():
            log.synced(messages)
        if sync:
            self._unsynced.clear()
        for log, target in zip(logs, targets, strict=True):
            log.logged(target)
        self.after_round(logs, self.wal.end)
        return batches

    async def _round_to_segments(self, log: DiskPartitionLog) -> int:
        """Writes and fsyncs ``log``'s new batches in its segment files (module docstring)."""
        self._waiting.clear()
        pending = log.take_for_segment()
        target, messages = log.log_end_offset, log.unsynced_messages
        if self._write_inline():
            self._timed_on_loop(lambda: log.writer.write_durably(pending))
        else:
            await asyncio.to_thread(log.writer.write_durably, pending)
        log.synced(messages)
        self.direct.written_directly(log, sum(len(data) for _, data, _ in pending), target)
        log.logged(target)
        self.after_round([log], self.wal.end)
        return len(pending)

    async def _gather_appends(self) -> None:
        """Lets the loop turn a few times before an inline round, so that requests a
        client pipelined (already in the socket, a few loop turns from their append)
        share its fsync: an inline fsync blocks the loop, so nothing read after it
        starts could join it. Stops after a turn that appended nothing."""
        if not self._write_inline():
            return  # a worker-thread round overlaps the reads anyway
        for turn in range(MAX_GATHER_TURNS):
            before = self._appends
            await asyncio.sleep(0)
            if turn >= MIN_GATHER_TURNS and self._appends == before:
                return

    def _write_inline(self) -> bool:
        # On small VMs a hand-off to a worker thread and back costs ~100 µs of CPU (two
        # cross-CPU wake-ups), more than a fast disk's whole write and fsync, and adds that
        # much latency. A slow disk must not stall the event loop, though: once inline
        # rounds average over the limit, rounds go to a worker thread, with one inline
        # probe every PROBE_INTERVAL_S to notice when the disk is fast again.
        if self.inline_write_max_us <= 0:
            return False
        if self._inline_write_us < self.inline_write_max_us:
            return True
        return time.monotonic() - self._last_inline_write >= PROBE_INTERVAL_S

    def _write_on_loop(self, parts: list[bytes | memoryview], sync: bool) -> None:
        self._timed_on_loop(lambda: self.wal.write(parts, sync))

    def _timed_on_loop(self, write: Callable[[], None]) -> None:
        started = time.perf_counter()
        write()
        elapsed_us = (time.perf_counter() - started) * 1e6
        self._last_inline_write = time.monotonic()
        # A moving average, so one slow fsync does not send the next rounds to a thread.
        self._inline_write_us += (elapsed_us - self._inline_write_us) / 8
