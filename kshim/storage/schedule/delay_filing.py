"""Which bytes each bucket file of the delay schedule receives for a run of records: a pure
function of the records and of the few facts of the store it needs (the delivery marks and
which minutes are held in memory), so that it can run in another process while the store
(kshim/storage/schedule/delay_store.py) stays where it is. The store writes the bytes, commits
their lengths and puts the entries of the minutes it holds in memory into its heap.

Entries are laid out as kshim/storage/schedule/delay_buckets.py says; a bucket's entries for one
store transaction are sent as one buffer.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kshim.protocol.packed_record import (
    LENGTH,
    RECORD_HEAD,
    header_prefix,
    pack_record,
)
from kshim.protocol.records import RecordView
from kshim.storage.schedule.delay_buckets import (
    ENTRY,
    MINUTE_MS,
    Bucket,
    EntryFields,
    bucket_for,
    entry_parts,
)

NO_MARK = (-(1 << 63), -1)  # below every entry
# An entry's header and its packed record's head, packed at once (delay_buckets.ENTRY,
# packed_record.RECORD_HEAD): what a record filed straight from its fields starts with.
_ENTRY_AND_RECORD_HEAD = struct.Struct(ENTRY.format + RECORD_HEAD.format.lstrip(">"))
# Decimal due times of at most this many digits are below 2**63: always in range.
MAX_DIGITS = 18
# What a record asks of the schedule: (due ms, or None for a cancel; whether it cancels
# the pending records with its key first), or None when it asks for nothing valid.
Request = tuple[int | None, bool] | None


def _due_layout(due_header: str) -> tuple[str, list[bytes], list[int]]:
    """The due time's header, then by the due time's digits the packed record's bytes
    after its value and before the due time (``header_prefix``) and its size but its key
    and value."""
    prefixes = [header_prefix(due_header, size) for size in range(MAX_DIGITS + 1)]
    sizes = [RECORD_HEAD.size + LENGTH.size + len(prefix) + digits
             for digits, prefix in enumerate(prefixes)]  # fmt: skip
    return due_header, prefixes, sizes


class NearBucket(NamedTuple):
    """A minute bucket delivery has begun on (``mark``: the last entry delivered, by order
    and seq) or whose entries are held in memory (``loaded``)."""

    mark: tuple[int, int]
    loaded: bool


class ScheduleChange(NamedTuple):
    """What one record of ``T.delay`` partition p does to the schedule of ``T`` partition
    p, in offset order: ``cancels`` cancels every pending record of the topic with the
    same key first; then, unless ``due_ms`` is None (a cancel), the record (``packed``,
    kshim.protocol.packed_record) is scheduled."""

    source_offset: int
    key: bytes | None
    cancels: bool
    due_ms: int | None
    packed: bytes | None


# ScheduleChange(...) runs a Python-level __new__; this builds the same tuple in C, for
# code that makes one per record of a delay topic (kshim/broker/delay/chunks.py).
new_change: Callable[[tuple[int, bytes | None, bool, int | None, bytes | None]],
                     ScheduleChange] = functools.partial(tuple.__new__, ScheduleChange)  # fmt: skip


@dataclass(slots=True)
class FiledBucket:
    """What one bucket receives in one store transaction."""

    mark: tuple[int, int]
    loaded: bool
    min_seq: int
    parts: list[bytes] = field(default_factory=list)
    first_due: dict[int, int] = field(default_factory=dict)  # per topic id, first order ms

    @property
    def size(self) -> int:
        return sum(map(len, self.parts))

    def joined(self) -> FiledBucket:
        """The same with its parts in one buffer: one object to send to another process or
        to write, not two per entry."""
        return FiledBucket(self.mark, self.loaded, self.min_seq, [b"".join(self.parts)],
                           self.first_due)  # fmt: skip


class Filer:
    """Files entries into buckets, in memory only. ``near``: per minute bucket start, the
    buckets delivery has begun on or that are held in memory (the store's
    ``near_buckets``); any other bucket has no mark and is not held."""

    def __init__(self, near: dict[int, NearBucket]) -> None:
        self._near = near
        self.buckets: dict[Bucket, FiledBucket] = {}
        self.loaded: list[EntryFields] = []  # for buckets held in memory, to be heaped
        self.filed = 0  # records filed by file_records
        self._plain: dict[int, tuple[Bucket, FiledBucket, bool]] = {}  # by minute: _found

    def file_records(
        self,
        records: Sequence[RecordView],
        seq: int,
        place: tuple[int, int, int],
        due_header: str,
        request_of: Callable[[RecordView], Request],
        cancels: list[tuple[bytes, int]],
    ) -> int:
        """Files ``records`` (of ``T.delay``, in offset order) as seqs from ``seq`` on into
        the schedule of topic id, partition (``place``, then now in ms); returns the next
        seq. Cancellations go to ``cancels`` as (key, seq). A record with a key, a value
        and one header, ``due_header`` with a decimal due time, is filed straight from its
        fields, laid out as ``pack_record`` and ``entry_parts`` would; any other is asked
        of ``request_of``, and one it refuses takes no seq. One Filer files for one
        ``place``: the buckets found are kept by minute.

        The loop (``_file_all``) runs for every record a delay topic receives and sets the
        rate at which the schedule fills, hence the common shape inlined: one struct for
        the entry's and the record's heads, one extend for the rest of the entry."""
        return self._file_all(records, seq, place, _due_layout(due_header), request_of, cancels)

    def _file_all(
        self,
        records: Sequence[RecordView],
        seq: int,
        place: tuple[int, int, int],
        due_layout: tuple[str, list[bytes], list[int]],
        request_of: Callable[[RecordView], Request],
        cancels: list[tuple[bytes, int]],
    ) -> int:
        topic_id, partition, now_ms = place
        plain, head, length = self._plain, _ENTRY_AND_RECORD_HEAD.pack, LENGTH.pack
        due_header, prefixes, sizes = due_layout
        record_head, filed = RECORD_HEAD.pack, 0
        for record in records:
            headers, key, value = record.headers, record.key, record.value
            # The common shape: a key, a value and one header, the due time in digits.
            if len(headers) == 1 and key is not None and value is not None:
                name, text = headers[0]
                # Digits first: int() refuses strings past 4,300 digits.
                if name == due_header and text and text.isdigit() and len(text) <= MAX_DIGITS:
                    due_ms = int(text)
                    minute = (due_ms if due_ms > now_ms else now_ms) // MINUTE_MS
                    if minute in plain:
                        bucket, filing, straight = plain[minute]
                    else:
                        bucket, filing, straight = self._found(minute, due_ms, now_ms, seq)
                    digits, key_length, value_length = len(text), len(key), len(value)
                    if straight:
                        filing.parts += (
                            head(due_ms, seq, topic_id, partition, record.offset,
                                 sizes[digits] + key_length + value_length,
                                 record.timestamp, 1, key_length),
                            key, length(value_length), value, prefixes[digits], text,
                        )  # fmt: skip
                        first_due = filing.first_due
                        if due_ms < first_due.get(topic_id, due_ms + 1):
                            first_due[topic_id] = due_ms
                    else:  # behind a delivery mark, or held in memory: _append says how
                        packed = b"".join((record_head(record.timestamp, 1, key_length), key,
                                           length(value_length), value, prefixes[digits],
                                           text))  # fmt: skip
                        self._append(bucket, filing, due_ms, seq, topic_id, partition,
                                     record.offset, packed)  # fmt: skip
                    filed, seq = filed + 1, seq + 1
                    continue
            seq = self._file_requested(record, seq, place, request_of, cancels)
        self.filed += filed
        return seq

    def _found(
        self, minute: int, due_ms: int, now_ms: int, seq: int
    ) -> tuple[Bucket, FiledBucket, bool]:
        """The bucket records routed to ``minute`` go to, its filing and whether they can
        be filed straight: a bucket without a delivery mark, not held in memory."""
        bucket = bucket_for(due_ms, now_ms)
        filing = self._bucket(bucket, seq)
        found = bucket, filing, filing.mark == NO_MARK and not filing.loaded
        self._plain[minute] = found
        return found

    def _file_requested(
        self,
        record: RecordView,
        seq: int,
        place: tuple[int, int, int],
        request_of: Callable[[RecordView], Request],
        cancels: list[tuple[bytes, int]],
    ) -> int:
        request = request_of(record)
        if request is None:
            return seq
        due_ms, cancels_first = request
        if cancels_first and record.key is not None:
            cancels.append((record.key, seq))
        if due_ms is not None:
            topic_id, partition, now_ms = place
            self.add(bucket_for(due_ms, now_ms), due_ms, seq, topic_id, partition,
                     record.offset, pack_record(record))  # fmt: skip
            self.filed += 1
        return seq + 1

    def chunk(
        self,
        start: int,
        first_seq: int,
        next_seq: int,
        topic_id: int,
        cancels: list[tuple[bytes, int]],
        near: dict[int, NearBucket],
    ) -> FiledChunk:
        """What ``file_records`` filed, as a chunk for the store to commit."""
        buckets = {bucket: filing.joined() for bucket, filing in self.buckets.items()}
        return FiledChunk(start, first_seq, topic_id, next_seq - first_seq, self.filed,
                          cancels, buckets, self.loaded, near)  # fmt: skip

    def file_changes(
        self,
        changes: Sequence[ScheduleChange],
        first_seq: int,
        topic_id: int,
        partition: int,
        now_ms: int,
    ) -> int:
        """Files the records ``changes`` schedule, the change at index i as seq
        ``first_seq`` + i; returns how many were filed. Runs for every record a delay
        topic receives, so the bucket is found once per minute of due time, not once per
        record."""
        seq = first_seq
        by_minute: dict[int, tuple[Bucket, FiledBucket]] = {}
        filed = 0
        for source_offset, _, _, due_ms, packed in changes:
            if due_ms is not None and packed is not None:
                # Every due time in one minute goes to the same bucket: the buckets of
                # each level are whole minutes aligned on the epoch.
                route = due_ms if due_ms > now_ms else now_ms
                found = by_minute.get(route // MINUTE_MS)
                if found is None:
                    bucket = bucket_for(due_ms, now_ms)
                    found = by_minute[route // MINUTE_MS] = (bucket, self._bucket(bucket, seq))
                self._append(*found, due_ms, seq, topic_id, partition, source_offset, packed)
                filed += 1
            seq += 1
        return filed

    def add(self, bucket: Bucket, order_ms: int, seq: int, topic_id: int, partition: int,
            source_offset: int, packed: bytes) -> None:  # fmt: skip
        """Files one entry already numbered (``seq``), as a split re-files them."""
        filing = self._bucket(bucket, seq)
        self._append(bucket, filing, order_ms, seq, topic_id, partition, source_offset, packed)

    def _bucket(self, bucket: Bucket, seq: int) -> FiledBucket:
        filing = self.buckets.get(bucket)
        if filing is None:
            near = self._near.get(bucket.start_ms) if bucket.is_minute else None
            mark, loaded = (NO_MARK, False) if near is None else near
            filing = self.buckets[bucket] = FiledBucket(mark, loaded, seq)
        elif seq < filing.min_seq:
            filing.min_seq = seq
        return filing

    def _append(self, bucket: Bucket, filing: FiledBucket, order_ms: int, seq: int,
                topic_id: int, partition: int, source_offset: int,
                packed: bytes) -> None:  # fmt: skip
        # Never behind what was delivered from the bucket: its mark must stay the boundary
        # between delivered and pending (a record due in the past, a split catching up, a
        # wall clock stepped back). It is overdue: it goes next.
        if (order_ms, seq) <= filing.mark:
            order_ms = filing.mark[0] + 1
        if filing.loaded:
            self.loaded.append((order_ms, seq, bucket.start_ms, topic_id, partition,
                                     source_offset, packed))  # fmt: skip
        filing.parts += entry_parts(order_ms, seq, topic_id, partition, source_offset, packed)
        if order_ms < filing.first_due.get(topic_id, order_ms + 1):
            filing.first_due[topic_id] = order_ms


@dataclass(slots=True)
class FiledChunk:
    """What a run of changes of one ``T.delay`` partition does to the schedule, ready to
    be committed by the store (``DelayStore.commit_chunk``) as long as nothing was
    scheduled meanwhile: the changes take the seqs from ``first_seq`` on."""

    start: int  # the partition's read position the changes were filtered by
    first_seq: int
    topic_id: int
    seqs: int  # how many seqs the changes take (one each, a cancel too)
    filed: int  # records filed (a cancel is not)
    cancels: list[tuple[bytes, int]]  # (record key, seq below which it is cancelled)
    buckets: dict[Bucket, FiledBucket]
    loaded: list[EntryFields]  # for buckets held in memory (delay_buckets.new_entry)
    near: dict[int, NearBucket]  # what the store said when the chunk was made


def file_chunk(
    changes: Sequence[ScheduleChange],
    start: int,
    first_seq: int,
    topic_id: int,
    partition: int,
    now_ms: int,
    near: dict[int, NearBucket],
) -> FiledChunk:
    """Files ``changes`` (in offset order) as of ``now_ms``; those below ``start`` were
    applied before (a replay after a crash) and are skipped."""
    # In offset order, so only a prefix can lie below the position.
    if changes and changes[0].source_offset < start:
        changes = [change for change in changes if change.source_offset >= start]
    # Each change takes the next seq, a cancel too: it cancels the records before it.
    cancels = [
        (change.key, first_seq + index)
        for index, change in enumerate(changes)
        if change.cancels and change.key is not None
    ]
    filer = Filer(near)
    filed = filer.file_changes(changes, first_seq, topic_id, partition, now_ms)
    buckets = {bucket: filing.joined() for bucket, filing in filer.buckets.items()}
    return FiledChunk(start, first_seq, topic_id, len(changes), filed, cancels, buckets,
                      filer.loaded, near)  # fmt: skip
