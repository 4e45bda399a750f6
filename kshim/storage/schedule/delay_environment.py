"""The delay schedule's state as the store holds it: the LMDB environment (opened when a
delayed record is first scheduled, closed between uses), the committed state of every
bucket, topic ids and the next seq in memory, the bucket files, and the lock every public
method of the store holds (``guarded``). The parts of the store (intake, upkeep, delivery,
summary: delay_store.py) build on this.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
from collections.abc import Callable, Iterator
from typing import Concatenate, ParamSpec, TypeVar

from kshim.protocol.packed_record import packed_key
from kshim.storage.files.filesystem import FileSystem, OsFileSystem
from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_types import (
    Database,
    DatabaseNotFound,
    Environment,
    Transaction,
    open_environment,
)
from kshim.storage.schedule.delay_buckets import LOAD_AHEAD_MS, Bucket, Entry, iter_entries
from kshim.storage.schedule.delay_filing import NO_MARK, NearBucket
from kshim.storage.schedule.delay_records import (
    SEQ,
    TOPIC_ID,
    BucketState,
    DelayedRecord,
    ScheduleLayoutError,
    decode_bucket_state,
)

log = logging.getLogger(__name__)

MAP_SIZE_BYTES = 1 << 36
_BUCKETS_DIR = "buckets"

_S = TypeVar("_S", bound="ScheduleEnvironment")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def guarded(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Runs ``method`` holding the store's lock, so ``release`` never closes the
    environment under a transaction of another thread."""

    @functools.wraps(method)
    def guarded_method(store: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with store.guard:
            return method(store, *args, **kwargs)

    return guarded_method


def bucket_key(bucket: Bucket) -> bytes:
    return keys.delay_bucket_key(bucket.width_ms, bucket.start_ms)


class ScheduleEnvironment:
    """The schedule's environment and what is kept of it in memory (see the module)."""

    # The environment's tables (kshim/storage/meta/lmdb_keys.py's DELAY_*_DB), set by _open.
    _state: Database
    _bucket_db: Database
    _positions: Database
    _topics: Database
    _cancels: Database
    _counts: Database
    _lateness: Database

    def __init__(
        self, directory: str, readonly: bool = False, filesystem: FileSystem | None = None
    ) -> None:
        """``readonly``: for tools reading a running broker's schedule (LMDB lets another
        process read while the broker writes; bucket files are only appended to)."""
        self._directory = directory
        self._buckets_dir = os.path.join(directory, _BUCKETS_DIR)
        self._readonly = readonly
        self._fs = filesystem or OsFileSystem()
        self._env: Environment | None = None
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
        self._purge_started = -math.inf  # no purge yet: the first is due at once

    @property
    def exists(self) -> bool:
        """Whether anything was ever scheduled here (the environment exists)."""
        return self._env is not None or os.path.isdir(self._directory)

    def _open(self) -> Environment:
        if self._env is None:
            os.makedirs(self._directory, exist_ok=True)
            env = open_environment(
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
            if not self._state_loaded:
                self._read_index()
                if not self._readonly:
                    self._load_state()
        return self._env

    def _read_index(self) -> None:
        """Reads the bucket index, topic ids and next seq (a reader of a stopped broker's
        schedule, ``kshim delays --export-to``, needs them too)."""
        assert self._env is not None
        with self._env.begin() as txn:
            for key, value in txn.cursor(db=self._bucket_db):
                width, start = keys.split_delay_bucket_key(key)
                self._buckets[Bucket(width, start)] = decode_bucket_state(bytes(value))
            for key, value in txn.cursor(db=self._topics):
                name, topic_id = bytes(key).decode("utf-8"), TOPIC_ID.unpack(value)[0]
                self._topic_ids[name] = topic_id
                self._topic_names[topic_id] = name
            stored = txn.get(keys.DELAY_SEQ_KEY, db=self._state)
            self.turn_under_way = txn.get(keys.DELAY_TURN_KEY, db=self._state) is not None
        self._next_seq = 0 if stored is None else SEQ.unpack(stored)[0]

    def _load_state(self) -> None:
        """Cuts each bucket file back to its committed length and removes files no bucket
        owns (a crash came between the write and the commit)."""
        self._fs.make_directory(self._buckets_dir)
        owned = {bucket.file_name: state for bucket, state in self._buckets.items()}
        for name in self._fs.list_directory(self._buckets_dir):
            path = os.path.join(self._buckets_dir, name)
            state = owned.get(name)
            self._cut_back(path, None if state is None else state.length)
            if state is not None and self._fs.size(path) < state.length:
                log.error("delay schedule bucket %s is shorter than committed", path)
        self._state_loaded = True

    @guarded
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

    @guarded
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

    def _count(self, txn: Transaction, topic: str, delta: int) -> None:
        if not delta:
            return
        count_key = keys.topic_prefix(topic)
        stored = txn.get(count_key, db=self._counts)
        count = (0 if stored is None else keys.decode_int64(stored)) + delta
        if count > 0:
            txn.put(count_key, keys.encode_int64(count), db=self._counts)
        else:
            txn.delete(count_key, db=self._counts)

    def _cancelled(self, txn: Transaction, entry: Entry) -> bool:
        """Whether a cancellation (or replace) came after ``entry`` was scheduled."""
        key = packed_key(entry.packed)
        if key is None:
            return False
        stored = txn.get(keys.delay_cancel_key(entry.topic_id, key), db=self._cancels)
        return stored is not None and entry.seq < SEQ.unpack(stored)[0]

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


def delayed_record(entry: Entry, topic: str) -> DelayedRecord:
    return DelayedRecord(entry.order_ms, TopicPartition(topic, entry.partition),
                         entry.source_offset, packed_key(entry.packed), entry.packed,
                         entry.seq)  # fmt: skip


def _refuse_old_layout(env: Environment) -> None:
    """Raises if the schedule is in the layout of an older kshim (every pending record in
    an LMDB table keyed by due time), which this one would not read: better to stop than
    to drop its records."""
    try:
        env.open_db(keys.DELAY_OLD_PENDING_DB, create=False)
    except DatabaseNotFound:
        return
    env.close()
    raise ScheduleLayoutError(
        "the delay schedule in this data directory was written by an older kshim (one LMDB "
        "table keyed by due time); deliver or move its pending records with that version"
    )


def has_cancels(txn: Transaction, cancels: Database) -> bool:
    return bool(txn.stat(cancels)["entries"])
