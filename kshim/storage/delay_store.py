"""Delayed delivery's durable schedule in LMDB: every pending record, ordered by due time.

A record produced to ``T.delay`` is read from that log once its transaction (if any) is
decided and copied here whole, so ``T.delay``'s own retention can never lose a pending
record however far ahead it is due (QMQ keeps its schedule apart from the message log
for the same reason; seed 002). The store holds, in its own LMDB environment:

- every pending record, packed (kshim.protocol.packed_record: its key first, so that a
  cancel reads only that), keyed by due time, then target partition and offset in
  ``T.delay`` (ties in produce order);
- the same records by (topic, hashed record key), for cancelling and replacing by key;
- per ``T.delay`` partition, the next offset not yet read into the schedule, moved in the
  same transaction as the records it covers (so a replay after a crash skips them);
- per target partition, the delivery under way: where ``T``'s log ended before the
  records were appended, and which records they are, so that a restart can tell
  from ``T`` itself whether they arrived (exactly once, see broker/delay/dispatcher.py);
- per topic, how many records are pending, and how late the delivered ones were (counts
  per lateness bucket, for ``kshim delays``).

The environment is created only when a delayed record is first scheduled: a broker
whose producers never delay anything has no such directory. LMDB reads through a memory
map, and appending in key order faults in each page the schedule grows by, so the
process's resident memory would grow with the records pending (1 KiB per 100 B record);
``release`` unmaps it between bursts of work (an open costs ~0.2 ms), keeping memory
bounded by what is due soon rather than by everything pending. Methods block on LMDB:
call them from a worker thread; they are serialised with ``release``.
"""

from __future__ import annotations

import bisect
import collections
import functools
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar

import lmdb

from kshim.protocol.packed_record import packed_key
from kshim.storage import lmdb_keys as keys
from kshim.storage.interface import TopicPartition
from kshim.storage.lmdb_ranges import delete_prefixed

MAP_SIZE_BYTES = 1 << 36
_ENTRY = struct.Struct(">qiq")  # due ms, partition, offset in T.delay (after a key digest)
_LENGTH = struct.Struct(">I")
# Upper bounds (ms) of the lateness buckets: delivered at most this long after the due time.
LATENESS_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 60_000)
_BUCKETS = struct.Struct(f">{len(LATENESS_BOUNDS_MS) + 1}q")  # the last: later than all


class DelayedRecord(NamedTuple):  # a tuple: one is built for every record
    """One pending record: due at ``due_ms`` in ``target`` (``T``, partition p), produced
    at ``source_offset`` of ``T.delay`` partition p."""

    due_ms: int
    target: TopicPartition
    source_offset: int
    key: bytes | None
    packed: bytes  # the record as produced (kshim.protocol.packed_record)

    @property
    def pending_key(self) -> bytes:
        return keys.delay_pending_key(self.due_ms, self.target, self.source_offset)


class ScheduleChange(NamedTuple):  # a tuple: one is built for every record
    """What one record of ``T.delay`` does to the schedule of ``topic`` (``T``), in offset
    order: ``cancels`` removes every pending record of the topic with the same key first;
    ``record`` (None for a cancel) is then scheduled."""

    source_offset: int
    key: bytes | None
    cancels: bool
    record: DelayedRecord | None
    topic: str


@dataclass(frozen=True, slots=True)
class Delivery:
    """A delivery under way: ``records`` were being appended to ``target`` at or after
    ``from_offset`` when the broker stopped."""

    target: TopicPartition
    from_offset: int
    pending_keys: list[bytes]


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
    def __init__(self, directory: str, readonly: bool = False) -> None:
        """``readonly``: for tools reading a running broker's schedule (LMDB lets another
        process read while the broker writes)."""
        self._directory = directory
        self._readonly = readonly
        self._env: Any = None
        self.guard = threading.RLock()

    @property
    def exists(self) -> bool:
        """Whether anything was ever scheduled here (the environment exists)."""
        return self._env is not None or os.path.isdir(self._directory)

    def _open(self) -> Any:
        if self._env is None:
            os.makedirs(self._directory, exist_ok=True)
            env = lmdb.open(
                self._directory,
                max_dbs=6,
                map_size=MAP_SIZE_BYTES,
                sync=True,
                readonly=self._readonly,
                create=not self._readonly,
            )
            self._pending = env.open_db(keys.DELAY_PENDING_DB)
            self._by_key = env.open_db(keys.DELAY_BY_KEY_DB)
            self._positions = env.open_db(keys.DELAY_POSITIONS_DB)
            self._in_flight = env.open_db(keys.DELAY_IN_FLIGHT_DB)
            self._counts = env.open_db(keys.DELAY_COUNTS_DB, create=not self._readonly)
            self._lateness = env.open_db(keys.DELAY_LATENESS_DB, create=not self._readonly)
            self._env = env
        return self._env

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
        changes: Sequence[ScheduleChange],
        next_position: int,
    ) -> None:
        """Applies ``changes`` (in offset order) and moves the partition's position to
        ``next_position``, atomically; changes below the stored position were applied
        before (a replay after a crash) and are skipped."""
        with self._open().begin(write=True) as txn:
            position_key = keys.partition_key(delay_partition)
            stored = txn.get(position_key, db=self._positions)
            start = 0 if stored is None else keys.decode_int64(stored)
            added: collections.Counter[str] = collections.Counter()
            for change in changes:
                if change.source_offset < start:
                    continue
                if change.cancels and change.key is not None:
                    added[change.topic] -= self._cancel(txn, change.topic, change.key)
                if change.record is not None:
                    added[change.topic] += self._add(txn, change.record)
            for topic, delta in added.items():
                self._count(txn, topic, delta)
            if next_position > start:
                txn.put(position_key, keys.encode_int64(next_position), db=self._positions)

    def _add(self, txn: Any, record: DelayedRecord) -> int:
        """Schedules ``record``; returns how many records that added (0 or 1)."""
        if not txn.put(record.pending_key, record.packed, db=self._pending, overwrite=False):
            return 0  # there already (scheduled before a crash)
        if record.key is not None:
            txn.put(_by_key_key(record), b"", db=self._by_key)
        return 1

    def _cancel(self, txn: Any, topic: str, key: bytes) -> int:
        """Removes the pending records of ``topic`` with ``key``; returns how many."""
        prefix = keys.delay_by_key_prefix(topic, keys.key_digest(key))
        cursor = txn.cursor(db=self._by_key)
        found = []
        if cursor.set_range(prefix):
            for index_key in cursor.iternext(keys=True, values=False):
                if not index_key.startswith(prefix):
                    break
                found.append(index_key)
        removed = 0
        for index_key in found:
            due_ms, partition, offset = _ENTRY.unpack(index_key[len(prefix) :])
            target = TopicPartition(topic, partition)
            txn.delete(index_key, db=self._by_key)
            removed += txn.delete(keys.delay_pending_key(due_ms, target, offset), db=self._pending)
        return removed

    def _add_lateness(self, txn: Any, topic: str, lateness_ms: Sequence[int]) -> None:
        stored = txn.get(keys.topic_prefix(topic), db=self._lateness)
        counts = list(_BUCKETS.unpack(stored)) if stored else [0] * (len(LATENESS_BOUNDS_MS) + 1)
        for late in lateness_ms:
            counts[bisect.bisect_left(LATENESS_BOUNDS_MS, late)] += 1
        txn.put(keys.topic_prefix(topic), _BUCKETS.pack(*counts), db=self._lateness)

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

    # -- delivering due records -------------------------------------------------------------

    @_guarded
    def next_due(self) -> int | None:
        """The due time (ms) of the first pending record, or None."""
        if not self.exists:
            return None
        with self._open().begin(db=self._pending) as txn:
            cursor = txn.cursor()
            if not cursor.first():
                return None
            return keys.split_delay_pending_key(cursor.key())[0]

    @_guarded
    def due(self, now_ms: int, limit: int) -> list[DelayedRecord]:
        """Up to ``limit`` pending records due at or before ``now_ms``, in due order."""
        if not self.exists:
            return []
        found: list[DelayedRecord] = []
        with self._open().begin(db=self._pending) as txn:
            for pending_key, stored in txn.cursor():
                due_ms, target, offset = keys.split_delay_pending_key(pending_key)
                if due_ms > now_ms or len(found) >= limit:
                    break
                packed = bytes(stored)
                found.append(DelayedRecord(due_ms, target, offset, packed_key(packed), packed))
        return found

    @_guarded
    def begin_delivery(
        self, target: TopicPartition, from_offset: int, records: Sequence[DelayedRecord]
    ) -> None:
        """Notes, durably, that ``records`` are about to be appended to ``target``, whose
        log ends at ``from_offset``."""
        value = keys.encode_int64(from_offset) + b"".join(
            _LENGTH.pack(len(record.pending_key)) + record.pending_key for record in records
        )
        with self._open().begin(write=True, db=self._in_flight) as txn:
            txn.put(keys.partition_key(target), value)

    @_guarded
    def finish_delivery(
        self,
        target: TopicPartition,
        pending_keys: Sequence[bytes],
        lateness_ms: Sequence[int] = (),
    ) -> None:
        """The records are in ``target`` durably (or were found there after a restart):
        they stop being pending, with the note of the delivery, atomically; ``lateness_ms``
        (how long after their due times they were delivered) joins the topic's counts."""
        with self._open().begin(write=True) as txn:
            if lateness_ms:
                self._add_lateness(txn, target.topic, lateness_ms)
            removed = 0
            for pending_key in pending_keys:
                stored = txn.get(pending_key, db=self._pending)
                if stored is None:
                    continue  # cancelled while it was being delivered
                txn.delete(pending_key, db=self._pending)
                record_key = packed_key(stored)
                if record_key is not None:
                    txn.delete(_by_key_key_of(pending_key, record_key), db=self._by_key)
                removed += 1
            self._count(txn, target.topic, -removed)
            txn.delete(keys.partition_key(target), db=self._in_flight)

    @_guarded
    def deliveries_under_way(self) -> list[Delivery]:
        """Deliveries begun and not finished (the broker stopped between the two)."""
        if not self.exists:
            return []
        with self._open().begin(db=self._in_flight) as txn:
            return [_delivery(key, bytes(value)) for key, value in txn.cursor()]

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
                _topic(key): _BUCKETS.unpack(value) for key, value in txn.cursor(db=self._lateness)
            }
            next_due: dict[str, int] = {}
            for pending_key in _iter_keys(txn.cursor(db=self._pending)):
                if len(next_due) == len(counts):
                    break
                due_ms, target, _ = keys.split_delay_pending_key(pending_key)
                next_due.setdefault(target.topic, due_ms)
        return {
            topic: TopicSummary(
                counts.get(topic, 0),
                next_due.get(topic),
                lateness.get(topic, (0,) * (len(LATENESS_BOUNDS_MS) + 1)),
            )
            for topic in sorted(counts.keys() | lateness.keys())
        }

    @_guarded
    def forget_topic(self, topic: str, delay_topic: str) -> None:
        """Removes every pending record of ``topic`` and the positions of ``delay_topic``
        (the topic was deleted: its delayed records go with it)."""
        if not self.exists:
            return
        with self._open().begin(write=True) as txn:
            doomed = [
                pending_key
                for pending_key in _iter_keys(txn.cursor(db=self._pending))
                if keys.split_delay_pending_key(pending_key)[1].topic == topic
            ]
            for pending_key in doomed:
                txn.delete(pending_key, db=self._pending)
            delete_prefixed(txn.cursor(db=self._by_key), keys.topic_prefix(topic))
            delete_prefixed(txn.cursor(db=self._positions), keys.topic_prefix(delay_topic))
            delete_prefixed(txn.cursor(db=self._in_flight), keys.topic_prefix(topic))
            txn.delete(keys.topic_prefix(topic), db=self._counts)
            txn.delete(keys.topic_prefix(topic), db=self._lateness)

    @_guarded
    def close(self) -> None:
        """Closes the environment; any later call opens it again."""
        if self._env is not None:
            self._env.close()
            self._env = None

    def release(self) -> None:
        """Unmaps the schedule's pages until it is next used (module docstring)."""
        self.close()


def _by_key_key(record: DelayedRecord) -> bytes:
    assert record.key is not None
    return _by_key_key_of(record.pending_key, record.key)


def _by_key_key_of(pending_key: bytes, record_key: bytes) -> bytes:
    due_ms, target, offset = keys.split_delay_pending_key(pending_key)
    prefix = keys.delay_by_key_prefix(target.topic, keys.key_digest(record_key))
    return prefix + _ENTRY.pack(due_ms, target.partition, offset)


def _delivery(key: bytes, value: bytes) -> Delivery:
    from_offset = keys.decode_int64(value[:8])
    pending_keys, position = [], 8
    while position < len(value):
        (length,) = _LENGTH.unpack_from(value, position)
        position += _LENGTH.size
        pending_keys.append(value[position : position + length])
        position += length
    return Delivery(keys.split_partition_key(key), from_offset, pending_keys)


def _topic(prefix: bytes) -> str:
    return bytes(prefix).rstrip(keys.NAME_TERMINATOR).decode("utf-8")


def _iter_keys(cursor: Any) -> Iterator[bytes]:
    for key in cursor.iternext(keys=True, values=False):
        yield bytes(key)
