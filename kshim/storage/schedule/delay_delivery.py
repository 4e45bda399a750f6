"""Delivering due records from the delay schedule: turns taken off the heap in due order,
noted durably before they go out and finished once they are in their topics."""

from __future__ import annotations

import bisect
import collections
import dataclasses
import heapq
from collections.abc import Sequence

from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_types import Transaction
from kshim.storage.schedule.delay_buckets import MINUTE_MS, Bucket, Entry
from kshim.storage.schedule.delay_environment import (
    bucket_key,
    delayed_record,
    guarded,
    has_cancels,
)
from kshim.storage.schedule.delay_records import (
    LATENESS,
    LATENESS_BOUNDS_MS,
    DelayedRecord,
    Turn,
    decode_turn,
    encode_turn,
)
from kshim.storage.schedule.delay_upkeep import ScheduleUpkeep


class ScheduleDelivery(ScheduleUpkeep):
    """Due records taken off the schedule in turns, each noted before it goes out."""

    @guarded
    def next_wake(self) -> int | None:
        """When something next needs doing (ms): the first record in memory falls due, a
        minute bucket is to be loaded or a coarse one split; None with nothing pending."""
        if not self.exists:
            return None
        self._open()
        times = [self._acts_at(b) for b in self._buckets if b.start_ms not in self._loaded]
        if self._heap:
            times.append(self._heap[0].order_ms)
        return min(times, default=None)

    @guarded
    def take_due(self, now_ms: int, limit: int) -> Turn:
        """Takes up to ``limit`` records due at or before ``now_ms`` off the heap, in due
        order, passing over cancelled ones; they stay in their files until ``finish_turn``."""
        records: list[DelayedRecord] = []
        turn = Turn(records, {}, collections.Counter())
        # A coarse bucket still being split holds records due from its start on: none
        # later may go before them (after a long stop, or a split falling behind).
        unsplit = [b.start_ms - 1 for b in self._buckets if not b.is_minute]
        now_ms = min(now_ms, *unsplit) if unsplit else now_ms
        if not self._heap or self._heap[0].order_ms > now_ms:
            return turn
        with self._open().begin() as txn:
            check = has_cancels(txn, self._cancels)
            while self._heap and self._heap[0].order_ms <= now_ms and len(records) < limit:
                entry = heapq.heappop(self._heap)
                self._loaded[entry.bucket_start_ms] -= 1
                turn.marks[entry.bucket_start_ms] = (entry.order_ms, entry.seq)
                self._marks[entry.bucket_start_ms] = (entry.order_ms, entry.seq)
                topic = self._topic_names.get(entry.topic_id)
                if topic is None:
                    continue  # its topic was deleted
                if check and self._cancelled(txn, entry):
                    turn.dropped[topic] += 1
                    continue
                records.append(delayed_record(entry, topic))
        return turn

    @guarded
    def begin_turn(self, turn: Turn) -> None:
        """Notes, durably, that ``turn``'s records are about to be appended to their
        topics, whose logs end at ``turn.from_offsets``."""
        with self._open().begin(write=True, db=self._state) as txn:
            txn.put(keys.DELAY_TURN_KEY, encode_turn(turn))
        self.turn_under_way = True

    @guarded
    def finish_turn(self, turn: Turn, now_ms: int, lateness_ms: Sequence[int] = ()) -> None:
        """``turn``'s records are in their topics durably (or were found there after a
        restart): the delivery marks move, the note goes and ``lateness_ms`` (per record,
        how long after its due time) joins the topics' counts, atomically. Minute buckets
        past and emptied are removed."""
        done = [
            bucket
            for bucket in self._buckets
            if bucket.is_minute and self._loaded.get(bucket.start_ms) == 0
        ]
        with self._open().begin(write=True) as txn:
            removed = collections.Counter(turn.dropped)
            late: dict[str, list[int]] = collections.defaultdict(list)
            for record, lateness in zip(turn.records, lateness_ms, strict=False):
                late[record.target.topic].append(lateness)
            for record in turn.records:
                removed[record.target.topic] += 1
            for topic, counts in late.items():
                self._add_lateness(txn, topic, counts)
            for topic, count in removed.items():
                self._count(txn, topic, -count)
            marked = {}
            for start, mark in turn.marks.items():
                bucket = Bucket(MINUTE_MS, start)
                state = self._buckets.get(bucket)
                if state is not None:
                    marked[bucket] = dataclasses.replace(state, mark=mark)
                    txn.put(bucket_key(bucket), marked[bucket].encode(), db=self._bucket_db)
            gone = [bucket for bucket in done if bucket.end_ms <= now_ms]
            for bucket in gone:
                txn.delete(bucket_key(bucket), db=self._bucket_db)
            txn.delete(keys.DELAY_TURN_KEY, db=self._state)
        self.turn_under_way = False
        self._buckets.update(marked)
        for bucket in gone:
            del self._buckets[bucket]
            del self._loaded[bucket.start_ms]
            del self._marks[bucket.start_ms]
            self._fs.remove(self._path(bucket))

    def _add_lateness(self, txn: Transaction, topic: str, lateness_ms: Sequence[int]) -> None:
        stored = txn.get(keys.topic_prefix(topic), db=self._lateness)
        counts = list(LATENESS.unpack(stored)) if stored else [0] * (len(LATENESS_BOUNDS_MS) + 1)
        for late in lateness_ms:
            counts[bisect.bisect_left(LATENESS_BOUNDS_MS, late)] += 1
        txn.put(keys.topic_prefix(topic), LATENESS.pack(*counts), db=self._lateness)

    @guarded
    def resume_turn(self, now_ms: int) -> Turn | None:
        """After a restart or a failed delivery: the turn noted by ``begin_turn`` and not
        finished, its records taken off the schedule again (None without one). The
        schedule in memory is rebuilt from the files first."""
        if not self.exists:
            return None
        self._open()
        self._heap, self._loaded, self._marks = [], {}, {}
        self.maintain(now_ms, split=False)
        with self._open().begin(db=self._state) as txn:
            stored = txn.get(keys.DELAY_TURN_KEY)
            if stored is None:
                self.turn_under_way = False
                return None
            marks, from_offsets, seqs = decode_turn(bytes(stored))
        for start in marks:  # loaded whatever the clock says now (it may have gone back)
            bucket = Bucket(MINUTE_MS, start)
            if bucket in self._buckets and start not in self._loaded:
                self._load(bucket)
        records: list[DelayedRecord] = []
        turn = Turn(records, marks, collections.Counter(), from_offsets)
        kept: list[Entry] = []
        for entry in self._heap:
            mark = marks.get(entry.bucket_start_ms)
            if mark is None or (entry.order_ms, entry.seq) > mark:
                kept.append(entry)
                continue
            self._loaded[entry.bucket_start_ms] -= 1
            topic = self._topic_names.get(entry.topic_id)
            if entry.seq in seqs and topic is not None:
                records.append(delayed_record(entry, topic))
            elif topic is not None:
                turn.dropped[topic] += 1
        records.sort(key=lambda record: (record.due_ms, record.seq))
        heapq.heapify(kept)
        self._heap = kept
        self._marks.update(marks)
        return turn

    @guarded
    def peek(self, limit: int) -> list[DelayedRecord]:
        """The first ``limit`` pending records in due order, left in place: every bucket
        file is read, so this is for inspection, never for delivery."""
        if not self.exists:
            return []
        entries: list[Entry] = []
        with self._open().begin() as txn:
            check = has_cancels(txn, self._cancels)
            for bucket, state in self._buckets.items():
                entries += [
                    entry
                    for entry in self._entries_after(bucket, state, self._mark(bucket))
                    if entry.topic_id in self._topic_names
                    and not (check and self._cancelled(txn, entry))
                ]
        return [
            delayed_record(entry, self._topic_names[entry.topic_id])
            for entry in heapq.nsmallest(limit, entries)
        ]
