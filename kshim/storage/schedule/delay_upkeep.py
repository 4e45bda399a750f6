"""Keeping the delay schedule's near buckets in memory: minute buckets loaded as their time
comes, coarse buckets split into finer ones a step at a time, spent cancellations
forgotten."""

from __future__ import annotations

import collections
import dataclasses
import heapq
import logging
import time

from kshim.storage.meta.lmdb_types import Transaction
from kshim.storage.schedule.delay_appends import Appends
from kshim.storage.schedule.delay_buckets import ENTRY, Bucket, bucket_for, iter_entries
from kshim.storage.schedule.delay_environment import (
    ScheduleEnvironment,
    bucket_key,
    guarded,
    has_cancels,
)
from kshim.storage.schedule.delay_filing import Filer
from kshim.storage.schedule.delay_records import SEQ, BucketState

log = logging.getLogger(__name__)

SPLIT_BYTES = 4 << 20  # of a coarse bucket re-filed per step, so a split never stalls delivery
PURGE_BATCH = 10_000  # cancellations looked at per step of a purge
PURGE_EVERY_S = 60.0


class ScheduleUpkeep(ScheduleEnvironment):
    """The buckets near now kept in memory, the coarse ones split as their time comes."""

    @guarded
    def maintain(self, now_ms: int, split: bool = True) -> bool:
        """Loads the minute buckets whose time has come, takes one step of splitting a
        coarse bucket whose time has come (unless ``split`` is false) and of forgetting
        spent cancellations; returns whether more splitting is waiting."""
        if not self.exists:
            return False
        self._open()
        for bucket in sorted(self._buckets, key=lambda b: b.start_ms):
            due = bucket.is_minute and self._acts_at(bucket) <= now_ms
            if due and bucket.start_ms not in self._loaded:
                self._load(bucket)
        if not split:
            return False
        waiting = [b for b in self._buckets if not b.is_minute and b.acts_at_ms <= now_ms]
        if waiting:
            self._split_step(min(waiting, key=lambda b: b.start_ms), now_ms)
        self._purge_step()
        return any(not b.is_minute and b.acts_at_ms <= now_ms for b in self._buckets)

    def _load(self, bucket: Bucket) -> None:
        state = self._buckets[bucket]
        entries = list(self._entries_after(bucket, state, state.mark))
        self._heap += entries
        heapq.heapify(self._heap)
        self._loaded[bucket.start_ms] = len(entries)
        self._marks[bucket.start_ms] = state.mark

    def _split_step(self, bucket: Bucket, now_ms: int) -> None:
        """Re-files up to SPLIT_BYTES of ``bucket`` into finer buckets; the bucket goes
        once all of it is re-filed. Cancelled records and deleted topics' are dropped."""
        state = self._buckets[bucket]
        data = self._read_split_chunk(bucket, state)
        # Shorter than committed (a damaged disk): what is there was re-filed, move on.
        data_end = 0 if data else state.length - state.split_position
        if not data:
            log.error("delay schedule bucket %s ends before its committed length", bucket)
        filer = Filer(self.near_buckets())
        filed = Appends(self, filer.buckets, filer.loaded)
        try:
            with self._open().begin(write=True) as txn:
                used = self._refile(txn, data, filer, filed.dropped, now_ms) or data_end
                for topic, dropped in filed.dropped.items():
                    self._count(txn, topic, -dropped)
                filed.commit(txn)
                after = dataclasses.replace(state, split_position=state.split_position + used)
                done = after.split_position >= after.length
                if done:
                    txn.delete(bucket_key(bucket), db=self._bucket_db)
                else:
                    txn.put(bucket_key(bucket), after.encode(), db=self._bucket_db)
        except BaseException:
            filed.rollback()
            raise
        filed.publish()
        if done:
            del self._buckets[bucket]
            self._fs.remove(self._path(bucket))
        else:
            self._buckets[bucket] = after

    def _refile(
        self,
        txn: Transaction,
        data: bytes,
        filer: Filer,
        dropped: collections.Counter[str],
        now_ms: int,
    ) -> int:
        """Files the whole entries of ``data`` into their buckets as of ``now_ms``, but
        cancelled records and deleted topics'; returns the bytes of ``data`` used."""
        check = has_cancels(txn, self._cancels)
        used = 0
        for used, entry in iter_entries(data):  # noqa: B007 (used after the loop)
            topic = self._topic_names.get(entry.topic_id)
            if topic is None:
                continue
            if check and self._cancelled(txn, entry):
                dropped[topic] += 1
                continue
            filer.add(bucket_for(entry.order_ms, now_ms), entry.order_ms, entry.seq,
                      entry.topic_id, entry.partition, entry.source_offset,
                      entry.packed)  # fmt: skip
        return used

    def _read_split_chunk(self, bucket: Bucket, state: BucketState) -> bytes:
        """The next SPLIT_BYTES of the bucket to re-file, or the one entry that starts
        there if it is longer."""
        left = state.length - state.split_position
        descriptor = self._fs.open_read(self._path(bucket))
        try:
            data = self._fs.pread(descriptor, min(left, SPLIT_BYTES), state.split_position)
            if len(data) >= ENTRY.size:
                entry_size = ENTRY.size + ENTRY.unpack_from(data)[-1]
                if entry_size > len(data):
                    data = self._fs.pread(descriptor, entry_size, state.split_position)
        finally:
            self._fs.close(descriptor)
        return data

    def _purge_step(self) -> None:
        """Forgets, a batch at a time and a pass a minute, the cancellations older than
        every record in the schedule: nothing is left for them to cancel."""
        if self._purge_from is None:
            if time.monotonic() - self._purge_started < PURGE_EVERY_S:
                return
            self._purge_started = time.monotonic()
            self._purge_from = b""
        oldest = min((s.min_seq for s in self._buckets.values()), default=self._next_seq)
        with self._open().begin(write=True, db=self._cancels) as txn:
            cursor = txn.cursor()
            batch: list[tuple[bytes, int]] = []
            if cursor.set_range(self._purge_from):
                for key, value in cursor.iternext():
                    batch.append((bytes(key), SEQ.unpack(value)[0]))
                    if len(batch) == PURGE_BATCH:
                        break
            for key, seq in batch:
                if seq <= oldest:
                    txn.delete(key)
        # Next time from just after the last key looked at; a short batch ends the pass.
        self._purge_from = batch[-1][0] + b"\x00" if len(batch) == PURGE_BATCH else None
