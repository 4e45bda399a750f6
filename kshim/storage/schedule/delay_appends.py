"""Entries appended to the delay schedule's bucket files in one store transaction."""

from __future__ import annotations

import collections
import heapq
import logging

from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_types import Transaction
from kshim.storage.schedule.delay_buckets import Bucket, EntryFields, new_entry
from kshim.storage.schedule.delay_environment import ScheduleEnvironment, bucket_key
from kshim.storage.schedule.delay_filing import FiledBucket
from kshim.storage.schedule.delay_records import SEQ, BucketState

log = logging.getLogger(__name__)


class Appends:
    """Entries appended to bucket files in one store transaction (delay_filing.Filer's):
    written and synced before the transaction commits the new lengths (``commit``), and
    put in memory after it (``publish``) for the buckets that are loaded."""

    def __init__(
        self,
        store: ScheduleEnvironment,
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

    def commit(self, txn: Transaction) -> None:
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
            txn.put(bucket_key(bucket), state.encode(), db=store._bucket_db)
            self._states[bucket] = state
        for topic, count in self.counts.items():
            store._count(txn, topic, count)
        txn.put(keys.DELAY_SEQ_KEY, SEQ.pack(store._next_seq), db=store._state)

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
