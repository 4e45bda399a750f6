"""Delayed delivery's durable schedule: every pending record, in append-only bucket files
by due time (kshim/storage/delay_buckets.py), with a small LMDB environment beside them.

A record produced to ``T.delay`` is read from that log once its transaction (if any) is
decided and copied here whole, so ``T.delay``'s own retention can never lose a pending
record however far ahead it is due (QMQ keeps its schedule apart from the message log
for the same reason: docs/references.md). Records are appended to the file of their bucket, never
inserted in place: a B-tree keyed by due time took a page write per record scattered
over the tree, half-empty pages and mapped memory growing with the records pending.
LMDB holds only what is small, in the same transaction as what it describes:

- per bucket, how many bytes of its file are committed (longer files are cut back at
  start: a crash came between the append and the commit), how far a split has read it,
  its delivery mark (the last record delivered, by order and seq) and the first due
  time per topic (for ``kshim delays``);
- per ``T.delay`` partition, the next offset not yet read into the schedule, moved with
  the bucket lengths of the records it covers (a replay after a crash skips them);
- the next seq (records are numbered as read) and topic ids (entries name their topic
  by a number; a deleted topic's id is dropped, so its entries are skipped as met);
- cancellations: per topic and hashed record key, the seq below which records with that
  key are cancelled (a replace is a cancel at the new record's own seq). A cancelled
  record stays in its file and is dropped when its bucket is split or it falls due;
  until then it counts as pending. A cancellation is forgotten once no bucket holds a
  record older than it;
- a delivery under way (``begin_turn``/``finish_turn``, kshim/broker/delay/dispatcher.py);
- per topic, records pending and how late the delivered ones were.

The minute buckets near now are held in memory, merged into one heap by (order, seq):
memory is bounded by the records due within about a minute, not by those pending. The
environment and directory are created only when a delayed record is first scheduled.
Methods block (files, LMDB): call them from one worker thread at a time; they are
serialised with ``release``.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import heapq
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar

import lmdb

from kshim.protocol.packed_record import packed_key
from kshim.storage import lmdb_keys as keys
from kshim.storage.delay_buckets import (
    ENTRY,
    LOAD_AHEAD_MS,
    MINUTE_MS,
    Bucket,
    Entry,
    EntryFields,
    bucket_for,
    iter_entries,
    new_entry,
)
from kshim.storage.delay_filing import (
    NO_MARK,
    FiledBucket,
    FiledChunk,
    Filer,
    NearBucket,
    ScheduleChange,
    file_chunk,
)
from kshim.storage.filesystem import FileSystem, OsFileSystem
from kshim.storage.interface import TopicPartition

log = logging.getLogger(__name__)

MAP_SIZE_BYTES = 1 << 36
SPLIT_BYTES = 4 << 20  # of a coarse bucket re-filed per step, so a split never stalls delivery
PURGE_BATCH = 10_000  # cancellations looked at per step of a purge
PURGE_EVERY_S = 60.0
# Upper bounds (ms) of the lateness buckets: delivered at most this long after the due time.
LATENESS_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 60_000)
_LATENESS = struct.Struct(f">{len(LATENESS_BOUNDS_MS) + 1}q")  # the last: later than all
_META = struct.Struct(">qqqqq")  # length, split position, mark order, mark seq, min seq
_TOPIC_FIRST = struct.Struct(">iq")  # topic id, first order ms
_BUCKET_KEY = struct.Struct(">qq")  # width, start
_INT32 = struct.Struct(">i")
_MARK = struct.Struct(">qqq")  # minute bucket start, order ms, seq
_TARGET = struct.Struct(">iqH")  # partition, log end offset, topic name length
_INT64 = struct.Struct(">q")
_SEQ_KEY = b"seq"
_NEXT_TOPIC_ID_KEY = b"topic_id"
_TURN_KEY = b"turn"
_BUCKETS_DIR = "buckets"


class ScheduleLayoutError(RuntimeError):
    """The schedule on disk is in a layout this kshim does not read."""


class DelayedRecord(NamedTuple):  # a tuple: one is built for every record
    """One pending record: due at ``due_ms`` in ``target`` (``T``, partition p), produced
    at ``source_offset`` of ``T.delay`` partition p; ``seq`` once in the schedule."""

    due_ms: int
    target: TopicPartition
    source_offset: int
    key: bytes | None
    packed: bytes  # the record as produced (kshim.protocol.packed_record)
    seq: int = -1


class StaleChunk(RuntimeError):
    """A filed chunk was made from a state of the store other than the one it is to be
    committed to (kshim/broker/delay/ingest.py files a chunk ahead, from the state the
    commit before it should leave, and files it again when that did not come about)."""


@dataclass(slots=True)
class Turn:
    """Records taken from the schedule to be delivered together: once they are in their
    topics, the delivery marks move to ``marks`` (minute bucket start -> order, seq)."""

    records: list[DelayedRecord]
    marks: dict[int, tuple[int, int]]
    dropped: collections.Counter[str]  # cancelled records passed over, per topic
    from_offsets: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicSummary:
    pending: int
    next_due_ms: int | None
    # Delivered records per lateness bucket (LATENESS_BOUNDS_MS, then one for later).
    lateness_counts: tuple[int, ...] = (0,) * (len(LATENESS_BOUNDS_MS) + 1)

    @property
    def delivered(self) -> int:
        return sum(self.lateness_counts)

    def lateness_percentile_ms(self, fraction: float) -> int | None:
        """The bucket bound at or below which ``fraction`` of deliveries were (None before
        the first; -1 when they fall in the last, unbounded bucket)."""
        if not self.delivered:
            return None
        wanted = fraction * self.delivered
        seen = 0
        for bound, count in zip(LATENESS_BOUNDS_MS, self.lateness_counts, strict=False):
            seen += count
            if seen >= wanted:
                return bound
        return -1


@dataclass(slots=True)
class BucketState:
    length: int = 0  # bytes of the file committed
    split_position: int = 0  # bytes already re-filed into finer buckets
    mark: tuple[int, int] = NO_MARK  # the last entry delivered (minute buckets)
    min_seq: int = -1  # of the records ever appended (a split appends older ones)
    first_due: dict[int, int] = field(default_factory=dict)  # topic id -> first order ms

    def encode(self) -> bytes:
        head = _META.pack(self.length, self.split_position, *self.mark, self.min_seq)
        return head + b"".join(_TOPIC_FIRST.pack(*item) for item in self.first_due.items())


def _bucket_state(value: bytes) -> BucketState:
    length, split_position, mark_order, mark_seq, min_seq = _META.unpack_from(value)
    first_due = dict(
        _TOPIC_FIRST.unpack_from(value, position)
        for position in range(_META.size, len(value), _TOPIC_FIRST.size)
    )
    return BucketState(length, split_position, (mark_order, mark_seq), min_seq, first_due)


def _bucket_key(bucket: Bucket) -> bytes:
    return _BUCKET_KEY.pack(bucket.width_ms, bucket.start_ms)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _guarded(
    method: Callable[Concatenate[DelayStore, _P], _R],
) -> Callable[Concatenate[DelayStore, _P], _R]:
    """Runs ``method`` holding the store's lock, so ``release`` never closes the
    environment under a transaction of another thread."""

    @functools.wraps(method)
    def guarded(store: DelayStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with store.guard:
            return method(store, *args, **kwargs)

    return guarded


class DelayStore:
    def __init__(
        self, directory: str, readonly: bool = False, filesystem: FileSystem | None = None
    ) -> None:
        """``readonly``: for tools reading a running broker's schedule (LMDB lets another
        process read while the broker writes; bucket files are only appended to)."""
        self._directory = directory
        self._buckets_dir = os.path.join(directory, _BUCKETS_DIR)
        self._readonly = readonly
        self._fs = filesystem or OsFileSystem()
        self._env: Any = None
        self.guard = threading.RLock()
        self._state_loaded = False
        self._buckets: dict[Bucket, BucketState] = {}
        self._topic_ids: dict[str, int] = {}
        self._topic_names: dict[int, str] = {}
        self._next_seq = 0
        self._heap: list[Entry] = []
        self._loaded: dict[int, int] = {}  # minute bucket start -> its entries in the heap
        self._marks: dict[int, tuple[int, int]] = {}  # of loaded buckets, as taken
        self.turn_under_way = False
        self._purge_from: bytes | None = None
        self._purge_started = -PURGE_EVERY_S

    @property
    def exists(self) -> bool:
        """Whether anything was ever scheduled here (the environment exists)."""
        return self._env is not None or os.path.isdir(self._directory)

    def _open(self) -> Any:
        if self._env is None:
            os.makedirs(self._directory, exist_ok=True)
            env = lmdb.open(
                self._directory,
                max_dbs=8,
                map_size=MAP_SIZE_BYTES,
                sync=True,
                readonly=self._readonly,
                create=not self._readonly,
            )
            _refuse_old_layout(env)
            create = not self._readonly
            self._state = env.open_db(keys.DELAY_STATE_DB, create=create)
            self._bucket_db = env.open_db(keys.DELAY_BUCKETS_DB, create=create)
            self._positions = env.open_db(keys.DELAY_POSITIONS_DB, create=create)
            self._topics = env.open_db(keys.DELAY_TOPICS_DB, create=create)
            self._cancels = env.open_db(keys.DELAY_CANCELS_DB, create=create)
            self._counts = env.open_db(keys.DELAY_COUNTS_DB, create=create)
            self._lateness = env.open_db(keys.DELAY_LATENESS_DB, create=create)
            self._env = env
            if not self._state_loaded and not self._readonly:
                self._load_state()
        return self._env

    def _load_state(self) -> None:
        """Reads the bucket index, topic ids and next seq; cuts each bucket file back to
        its committed length and removes files no bucket owns (a crash came between the
        write and the commit)."""
        self._fs.make_directory(self._buckets_dir)
        with self._env.begin() as txn:
            for key, value in txn.cursor(db=self._bucket_db):
                width, start = _BUCKET_KEY.unpack(key)
                self._buckets[Bucket(width, start)] = _bucket_state(bytes(value))
            for key, value in txn.cursor(db=self._topics):
                name, topic_id = bytes(key).decode("utf-8"), _INT32.unpack(value)[0]
                self._topic_ids[name] = topic_id
                self._topic_names[topic_id] = name
            stored = txn.get(_SEQ_KEY, db=self._state)
            self.turn_under_way = txn.get(_TURN_KEY, db=self._state) is not None
        self._next_seq = 0 if stored is None else _INT64.unpack(stored)[0]
        owned = {bucket.file_name: state for bucket, state in self._buckets.items()}
        for name in self._fs.list_directory(self._buckets_dir):
            path = os.path.join(self._buckets_dir, name)
            state = owned.get(name)
            self._cut_back(path, None if state is None else state.length)
            if state is not None and self._fs.size(path) < state.length:
                log.error("delay schedule bucket %s is shorter than committed", path)
        self._state_loaded = True

    # -- reading T.delay into the schedule ------------------------------------------------

    @_guarded
    def position(self, delay_partition: TopicPartition) -> int:
        """The next offset of the ``T.delay`` partition not yet read into the schedule."""
        if not self.exists:
            return 0
        with self._open().begin(db=self._positions) as txn:
            value = txn.get(keys.partition_key(delay_partition))
        return 0 if value is None else keys.decode_int64(value)

    @_guarded
    def schedule(
        self,
        delay_partition: TopicPartition,
        target: TopicPartition,
        changes: Sequence[ScheduleChange],
        next_position: int,
        now_ms: int,
    ) -> None:
        """Applies ``changes`` of ``delay_partition`` (in offset order) to the schedule of
        ``target`` and moves the partition's position to ``next_position``, atomically;
        changes below the stored position were applied before (a replay after a crash)
        and are skipped."""
        chunk = file_chunk(changes, self.position(delay_partition), self._next_seq,
                           self.topic_id(target.topic), target.partition, now_ms,
                           self.near_buckets())  # fmt: skip
        self.commit_chunk(delay_partition, target, chunk, next_position)

    @_guarded
    def topic_id(self, topic: str) -> int:
        """The number entries name ``topic`` by, given (durably) if it has none."""
        topic_id = self._topic_ids.get(topic)
        if topic_id is None:
            with self._open().begin(write=True) as txn:
                stored = txn.get(_NEXT_TOPIC_ID_KEY, db=self._state)
                topic_id = 0 if stored is None else _INT32.unpack(stored)[0]
                txn.put(_NEXT_TOPIC_ID_KEY, _INT32.pack(topic_id + 1), db=self._state)
                txn.put(topic.encode("utf-8"), _INT32.pack(topic_id), db=self._topics)
            self._topic_ids[topic] = topic_id
            self._topic_names[topic_id] = topic
        return topic_id

    @property
    def next_seq(self) -> int:
        """The seq the next change read into the schedule takes."""
        return self._next_seq

    @_guarded
    def near_buckets(self) -> dict[int, NearBucket]:
        """Per minute bucket start, the buckets delivery has begun on or that are held in
        memory: what filing records needs to know of the store (delay_filing.Filer)."""
        if not self.exists:
            return {}
        self._open()
        near = {start: NearBucket(self._marks[start], True) for start in self._loaded}
        for bucket, state in self._buckets.items():
            if bucket.is_minute and state.mark != NO_MARK and bucket.start_ms not in near:
                near[bucket.start_ms] = NearBucket(state.mark, False)
        return near

    @_guarded
    def commit_chunk(
        self,
        delay_partition: TopicPartition,
        target: TopicPartition,
        chunk: FiledChunk,
        next_position: int,
    ) -> None:
        """Appends ``chunk`` (delay_filing.file_chunk's, for ``target`` and made from this
        store's ``position``, ``next_seq``, ``topic_id`` and ``near_buckets``) to the
        bucket files and moves the partition's position to ``next_position``, atomically.
        Raises StaleChunk if the store has changed since those were read."""
        if (chunk.first_seq != self._next_seq
                or self._topic_names.get(chunk.topic_id) != target.topic
                or chunk.near != self.near_buckets()):  # fmt: skip
            raise StaleChunk(f"{delay_partition}: the schedule changed under a filed chunk")
        filed = _Filing(self, chunk.buckets, chunk.loaded)
        try:
            with self._open().begin(write=True) as txn:
                position_key = keys.partition_key(delay_partition)
                stored = txn.get(position_key, db=self._positions)
                start = 0 if stored is None else keys.decode_int64(stored)
                if start != chunk.start:
                    raise StaleChunk(f"{delay_partition}: read from {chunk.start}, not {start}")
                for key, seq in chunk.cancels:
                    txn.put(_cancel_key(chunk.topic_id, key), _INT64.pack(seq), db=self._cancels)
                filed.counts[target.topic] += chunk.filed
                self._next_seq = chunk.first_seq + chunk.seqs
                filed.commit(txn)
                if next_position > start:
                    txn.put(position_key, keys.encode_int64(next_position), db=self._positions)
        except BaseException:
            filed.rollback()
            raise
        filed.publish()

    def _count(self, txn: Any, topic: str, delta: int) -> None:
        if not delta:
            return
        count_key = keys.topic_prefix(topic)
        stored = txn.get(count_key, db=self._counts)
        count = (0 if stored is None else keys.decode_int64(stored)) + delta
        if count > 0:
            txn.put(count_key, keys.encode_int64(count), db=self._counts)
        else:
            txn.delete(count_key, db=self._counts)

    # -- keeping the near buckets in memory ------------------------------------------------

    @_guarded
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

    def _acts_at(self, bucket: Bucket) -> int:
        """When the bucket is loaded (a minute) or split: as delay_buckets says, but a
        minute is loaded by the time its first record falls due even if that is before
        the minute starts. A record due by the clock as it read goes to the minute the clock
        read (``bucket_for``); if the wall clock read ahead and has stepped back since,
        that minute starts after the record's due time."""
        if not bucket.is_minute:
            return bucket.acts_at_ms
        first_due = min(self._buckets[bucket].first_due.values(), default=bucket.start_ms)
        return min(bucket.acts_at_ms, first_due - LOAD_AHEAD_MS)

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
        filed = _Filing(self, filer.buckets, filer.loaded)
        try:
            with self._open().begin(write=True) as txn:
                used = self._refile(txn, data, filer, filed.dropped, now_ms) or data_end
                for topic, dropped in filed.dropped.items():
                    self._count(txn, topic, -dropped)
                filed.commit(txn)
                after = dataclasses.replace(state, split_position=state.split_position + used)
                done = after.split_position >= after.length
                if done:
                    txn.delete(_bucket_key(bucket), db=self._bucket_db)
                else:
                    txn.put(_bucket_key(bucket), after.encode(), db=self._bucket_db)
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
        txn: Any,
        data: bytes,
        filer: Filer,
        dropped: collections.Counter[str],
        now_ms: int,
    ) -> int:
        """Files the whole entries of ``data`` into their buckets as of ``now_ms``, but
        cancelled records and deleted topics'; returns the bytes of ``data`` used."""
        check = _has_cancels(txn, self._cancels)
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

    def _cancelled(self, txn: Any, entry: Entry) -> bool:
        """Whether a cancellation (or replace) came after ``entry`` was scheduled."""
        key = packed_key(entry.packed)
        if key is None:
            return False
        stored = txn.get(_cancel_key(entry.topic_id, key), db=self._cancels)
        return stored is not None and entry.seq < _INT64.unpack(stored)[0]

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
                    batch.append((bytes(key), _INT64.unpack(value)[0]))
                    if len(batch) == PURGE_BATCH:
                        break
            for key, seq in batch:
                if seq <= oldest:
                    txn.delete(key)
        # Next time from just after the last key looked at; a short batch ends the pass.
        self._purge_from = batch[-1][0] + b"\x00" if len(batch) == PURGE_BATCH else None

    # -- delivering due records -------------------------------------------------------------

    @_guarded
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

    @_guarded
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
            check = _has_cancels(txn, self._cancels)
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
                records.append(_record(entry, topic))
        return turn

    @_guarded
    def begin_turn(self, turn: Turn) -> None:
        """Notes, durably, that ``turn``'s records are about to be appended to their
        topics, whose logs end at ``turn.from_offsets``."""
        with self._open().begin(write=True, db=self._state) as txn:
            txn.put(_TURN_KEY, _encode_turn(turn))
        self.turn_under_way = True

    @_guarded
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
                    txn.put(_bucket_key(bucket), marked[bucket].encode(), db=self._bucket_db)
            gone = [bucket for bucket in done if bucket.end_ms <= now_ms]
            for bucket in gone:
                txn.delete(_bucket_key(bucket), db=self._bucket_db)
            txn.delete(_TURN_KEY, db=self._state)
        self.turn_under_way = False
        self._buckets.update(marked)
        for bucket in gone:
            del self._buckets[bucket]
            del self._loaded[bucket.start_ms]
            del self._marks[bucket.start_ms]
            self._fs.remove(self._path(bucket))

    def _add_lateness(self, txn: Any, topic: str, lateness_ms: Sequence[int]) -> None:
        stored = txn.get(keys.topic_prefix(topic), db=self._lateness)
        counts = list(_LATENESS.unpack(stored)) if stored else [0] * (len(LATENESS_BOUNDS_MS) + 1)
        for late in lateness_ms:
            counts[bisect.bisect_left(LATENESS_BOUNDS_MS, late)] += 1
        txn.put(keys.topic_prefix(topic), _LATENESS.pack(*counts), db=self._lateness)

    @_guarded
    def resume_turn(self, now_ms: int) -> Turn | None:
        """After a restart or a failed delivery: the turn noted by ``begin_turn`` and not
        finished, its records taken off the schedule again (None without one). The
        schedule in memory is rebuilt from the files first."""
        if not self.exists:
            return None
        self._open()
        self._heap, self._loaded, self._marks = [], {}, {}
        self.maintain(now_ms, split=False)
        with self._env.begin(db=self._state) as txn:
            stored = txn.get(_TURN_KEY)
            if stored is None:
                self.turn_under_way = False
                return None
            marks, from_offsets, seqs = _decode_turn(bytes(stored))
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
                records.append(_record(entry, topic))
            elif topic is not None:
                turn.dropped[topic] += 1
        records.sort(key=lambda record: (record.due_ms, record.seq))
        heapq.heapify(kept)
        self._heap = kept
        self._marks.update(marks)
        return turn

    @_guarded
    def peek(self, limit: int) -> list[DelayedRecord]:
        """The first ``limit`` pending records in due order, left in place: every bucket
        file is read, so this is for inspection, never for delivery."""
        if not self.exists:
            return []
        entries: list[Entry] = []
        with self._open().begin() as txn:
            check = _has_cancels(txn, self._cancels)
            for bucket, state in self._buckets.items():
                entries += [
                    entry
                    for entry in self._entries_after(bucket, state, self._mark(bucket))
                    if entry.topic_id in self._topic_names
                    and not (check and self._cancelled(txn, entry))
                ]
        return [
            _record(entry, self._topic_names[entry.topic_id])
            for entry in heapq.nsmallest(limit, entries)
        ]

    # -- statistics and topic deletion ------------------------------------------------------

    @_guarded
    def summary(self) -> dict[str, TopicSummary]:
        """Pending records, the next due time and the lateness counts, per topic with any
        record pending or delivered."""
        if not self.exists:
            return {}
        with self._open().begin() as txn:
            counts = {
                _topic(key): keys.decode_int64(value) for key, value in txn.cursor(db=self._counts)
            }
            lateness = {
                _topic(key): _LATENESS.unpack(value) for key, value in txn.cursor(db=self._lateness)
            }
            names = {
                _INT32.unpack(value)[0]: bytes(key).decode("utf-8")
                for key, value in txn.cursor(db=self._topics)
            }
            buckets = [
                (Bucket(*_BUCKET_KEY.unpack(key)), _bucket_state(bytes(value)))
                for key, value in txn.cursor(db=self._bucket_db)
            ]
        next_due = self._first_due(buckets, names)
        return {
            topic: TopicSummary(
                counts.get(topic, 0),
                next_due.get(topic),
                lateness.get(topic, (0,) * (len(LATENESS_BOUNDS_MS) + 1)),
            )
            for topic in sorted(counts.keys() | lateness.keys())
        }

    def _first_due(
        self, buckets: Iterable[tuple[Bucket, BucketState]], names: dict[int, str]
    ) -> dict[str, int]:
        """Per topic, the first due time in the buckets: from each bucket's index, but
        read from the file for a minute bucket delivery has begun on."""
        first: dict[str, int] = {}
        for bucket, state in buckets:
            if state.mark == NO_MARK:
                found = state.first_due
            else:
                found = {}
                for entry in self._entries_after(bucket, state, state.mark, missing_ok=True):
                    found[entry.topic_id] = min(found.get(entry.topic_id, entry.order_ms),
                                                entry.order_ms)  # fmt: skip
            for topic_id, due in found.items():
                name = names.get(topic_id)
                if name is not None and due < first.get(name, due + 1):
                    first[name] = due
        return first

    @_guarded
    def forget_topic(self, topic: str, delay_topic: str) -> None:
        """Forgets ``topic``'s pending records (skipped wherever they are met: their
        topic id is gone) and the positions of ``delay_topic`` (the topic was deleted)."""
        if not self.exists:
            return
        with self._open().begin(write=True) as txn:
            topic_id = self._topic_ids.pop(topic, None)
            if topic_id is not None:
                del self._topic_names[topic_id]
            txn.delete(topic.encode("utf-8"), db=self._topics)
            cursor = txn.cursor(db=self._positions)
            prefix = keys.topic_prefix(delay_topic)
            while cursor.set_range(prefix) and bytes(cursor.key()).startswith(prefix):
                cursor.delete()
            txn.delete(keys.topic_prefix(topic), db=self._counts)
            txn.delete(keys.topic_prefix(topic), db=self._lateness)

    @_guarded
    def close(self) -> None:
        """Closes the environment; any later call opens it again."""
        if self._env is not None:
            self._env.close()
            self._env = None

    def release(self) -> None:
        """Closes the environment until it is next used (an open costs ~0.2 ms): LMDB
        reads through a memory map, and the pages a turn touched (cancellations looked up
        by hashed key, scattered over the file) would otherwise stay resident."""
        self.close()

    def _entries_after(
        self, bucket: Bucket, state: BucketState, mark: tuple[int, int], missing_ok: bool = False
    ) -> Iterator[Entry]:
        """The bucket's committed entries after ``mark`` not yet re-filed by a split;
        none if ``missing_ok`` and the file is gone (the broker removed it since a
        reader in another process looked)."""
        try:
            data = self._fs.read_file(self._path(bucket))[: state.length]
        except FileNotFoundError:
            if not missing_ok:
                raise
            return
        for end, entry in iter_entries(data, bucket.start_ms):
            if end > state.split_position and (entry.order_ms, entry.seq) > mark:
                yield entry

    def _cut_back(self, path: str, length: int | None) -> None:
        """Cuts a bucket file to its committed ``length``, or removes it if no bucket owns
        it (None): what a write that was never committed left there."""
        if not self._fs.exists(path):
            return
        if length is None:
            self._fs.remove(path)
        elif self._fs.size(path) > length:
            self._fs.truncate(path, length)

    def _mark(self, bucket: Bucket) -> tuple[int, int]:
        """The last record delivered from a minute bucket (taken, while it is loaded)."""
        if bucket.start_ms in self._loaded:
            return self._marks[bucket.start_ms]
        state = self._buckets.get(bucket)
        return NO_MARK if state is None else state.mark

    def _path(self, bucket: Bucket) -> str:
        return os.path.join(self._buckets_dir, bucket.file_name)


class _Filing:
    """Entries appended to bucket files in one store transaction (delay_filing.Filer's):
    written and synced before the transaction commits the new lengths (``commit``), and
    put in memory after it (``publish``) for the buckets that are loaded."""

    def __init__(
        self,
        store: DelayStore,
        buckets: dict[Bucket, FiledBucket],
        loaded: list[EntryFields],
    ) -> None:
        self._store = store
        self._buckets = buckets
        self._loaded = loaded
        self.counts: collections.Counter[str] = collections.Counter()
        self.dropped: collections.Counter[str] = collections.Counter()
        self._seq_before = store._next_seq
        self._written: list[Bucket] = []
        self._states: dict[Bucket, BucketState] = {}

    def commit(self, txn: Any) -> None:
        store = self._store
        fs = store._fs
        paths, created = [], False
        for bucket, filing in self._buckets.items():
            path = store._path(bucket)
            committed = store._buckets.get(bucket)
            created |= committed is None
            # Appends land at the committed end even if a failed write's cut-back failed.
            store._cut_back(path, 0 if committed is None else committed.length)
            self._written.append(bucket)
            descriptor = fs.open_append(path)
            try:
                fs.write(descriptor, [b"".join(filing.parts)])  # one buffer, not a view each
            finally:
                fs.close(descriptor)
            paths.append(path)
        fs.sync_all(paths, [store._buckets_dir] if created else [])
        for bucket, filing in self._buckets.items():
            old = store._buckets.get(bucket) or BucketState(min_seq=filing.min_seq)
            min_seq = min(old.min_seq, filing.min_seq)
            state = BucketState(old.length + filing.size, old.split_position,
                                old.mark, min_seq, dict(old.first_due))  # fmt: skip
            for topic_id, due in filing.first_due.items():
                state.first_due[topic_id] = min(state.first_due.get(topic_id, due), due)
            txn.put(_bucket_key(bucket), state.encode(), db=store._bucket_db)
            self._states[bucket] = state
        for topic, count in self.counts.items():
            store._count(txn, topic, count)
        txn.put(_SEQ_KEY, _INT64.pack(store._next_seq), db=store._state)

    def rollback(self) -> None:
        """Undoes what a transaction that failed left behind: bytes appended past the
        committed lengths (a retry would commit them as its own) and seqs."""
        store = self._store
        for bucket in self._written:
            state = store._buckets.get(bucket)
            try:
                store._cut_back(store._path(bucket), None if state is None else state.length)
            except OSError:  # cut back before the next append to it, or at the next start
                log.exception("delay schedule: cannot cut back %s", bucket.file_name)
        store._next_seq = self._seq_before

    def publish(self) -> None:
        store = self._store
        store._buckets.update(self._states)
        for fields in self._loaded:
            entry = new_entry(fields)
            heapq.heappush(store._heap, entry)
            store._loaded[entry.bucket_start_ms] += 1


def _record(entry: Entry, topic: str) -> DelayedRecord:
    return DelayedRecord(entry.order_ms, TopicPartition(topic, entry.partition),
                         entry.source_offset, packed_key(entry.packed), entry.packed,
                         entry.seq)  # fmt: skip


def _refuse_old_layout(env: Any) -> None:
    """Raises if the schedule is in the layout of an older kshim (every pending record in
    an LMDB table keyed by due time), which this one would not read: better to stop than
    to drop its records."""
    try:
        env.open_db(b"delay_pending", create=False)
    except lmdb.NotFoundError:
        return
    env.close()
    raise ScheduleLayoutError(
        "the delay schedule in this data directory was written by an older kshim (one LMDB "
        "table keyed by due time); deliver or move its pending records with that version"
    )


def _has_cancels(txn: Any, cancels: Any) -> bool:
    return bool(txn.stat(cancels)["entries"])


def _encode_turn(turn: Turn) -> bytes:
    """The marks, then per target its partition, log end and topic name, then the seqs."""
    parts = [_INT32.pack(len(turn.marks))]
    parts += [_MARK.pack(start, *mark) for start, mark in turn.marks.items()]
    parts.append(_INT32.pack(len(turn.from_offsets)))
    for target, from_offset in turn.from_offsets.items():
        name = target.topic.encode("utf-8")
        parts += [_TARGET.pack(target.partition, from_offset, len(name)), name]
    parts.append(b"".join(_INT64.pack(record.seq) for record in turn.records))
    return b"".join(parts)


def _decode_turn(
    data: bytes,
) -> tuple[dict[int, tuple[int, int]], dict[TopicPartition, int], set[int]]:
    (count,) = _INT32.unpack_from(data)
    position = _INT32.size
    marks = {}
    for _ in range(count):
        start, order, seq = _MARK.unpack_from(data, position)
        marks[start] = (order, seq)
        position += _MARK.size
    (count,) = _INT32.unpack_from(data, position)
    position += _INT32.size
    from_offsets = {}
    for _ in range(count):
        partition, from_offset, length = _TARGET.unpack_from(data, position)
        position += _TARGET.size
        topic = data[position : position + length].decode("utf-8")
        position += length
        from_offsets[TopicPartition(topic, partition)] = from_offset
    seqs = {seq for (seq,) in _INT64.iter_unpack(data[position:])}
    return marks, from_offsets, seqs


def _cancel_key(topic_id: int, key: bytes) -> bytes:
    return _INT32.pack(topic_id) + keys.key_digest(key)


def _topic(prefix: bytes) -> str:
    return bytes(prefix).rstrip(keys.NAME_TERMINATOR).decode("utf-8")
