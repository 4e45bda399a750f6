"""The delay schedule's buckets: which file a pending record is appended to, and when a
file is split into finer ones or loaded into memory. Pure functions.

QMQ's multi-level schedule (docs/references.md): records due far ahead share coarse buckets,
near ones fine buckets, so two years take a few hundred files rather than one per
minute, and the only bucket ever read whole is a minute's. Levels here: a week beyond
14 days, a day beyond 2 days, an hour beyond 2 hours, a minute below. A coarse bucket
is split into the next finer level once its start comes within that level's horizon;
a minute bucket is loaded into memory LOAD_AHEAD_MS before it starts. Buckets are
aligned to multiples of their width since the epoch, so each level's buckets tile the
next coarser level's exactly.

A bucket file is a sequence of entries: ``int64 order ms, int64 seq, int32 topic id,
int32 partition, int64 offset in T.delay, uint32 length``, then the record as packed by
kshim.protocol.packed_record. ``order ms`` is the due time (raised to the bucket's
delivery mark when a record arrives behind it, see kshim/storage/schedule/delay_store.py); ``seq``
numbers records in the order they were read into the schedule.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
WEEK_MS = 7 * DAY_MS
# A bucket of each coarse width is split into the next finer width once its start is
# at most this far ahead (the finer level's horizon).
SPLIT_AHEAD_MS = {HOUR_MS: 2 * HOUR_MS, DAY_MS: 2 * DAY_MS, WEEK_MS: 14 * DAY_MS}
FINER = {HOUR_MS: MINUTE_MS, DAY_MS: HOUR_MS, WEEK_MS: DAY_MS}
COARSEST_FIRST = (WEEK_MS, DAY_MS, HOUR_MS)
# Loading a crowded minute takes a moment: it starts this long before the minute does.
LOAD_AHEAD_MS = 2_000
_LETTERS = {MINUTE_MS: "m", HOUR_MS: "h", DAY_MS: "d", WEEK_MS: "w"}

ENTRY = struct.Struct(">qqiiqI")


class Bucket(NamedTuple):
    width_ms: int
    start_ms: int

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.width_ms

    @property
    def is_minute(self) -> bool:
        return self.width_ms == MINUTE_MS

    @property
    def acts_at_ms(self) -> int:
        """When the bucket is loaded (a minute) or split (coarser)."""
        if self.is_minute:
            return self.start_ms - LOAD_AHEAD_MS
        return self.start_ms - SPLIT_AHEAD_MS[self.width_ms]

    @property
    def file_name(self) -> str:
        return f"{_LETTERS[self.width_ms]}{self.start_ms}"


def bucket_for(order_ms: int, now_ms: int) -> Bucket:
    """The bucket a record ordered at ``order_ms`` goes to at ``now_ms``: the coarsest
    whose time to split has not come. A record due now or earlier goes to the current
    minute, which is loaded: it is delivered at once."""
    route = max(order_ms, now_ms)
    for width in COARSEST_FIRST:
        start = route - route % width
        if start - SPLIT_AHEAD_MS[width] > now_ms:
            return Bucket(width, start)
    return Bucket(MINUTE_MS, route - route % MINUTE_MS)


class Entry(NamedTuple):
    """One pending record of a bucket; tuples compare by (order, seq), which are unique."""

    order_ms: int
    seq: int
    bucket_start_ms: int  # of the minute bucket holding it (entries in memory only)
    topic_id: int
    partition: int
    source_offset: int
    packed: bytes


# An entry's fields as a plain tuple: what travels between processes (pickling a named
# tuple builds each one through its Python-level __new__ again), made an Entry in C.
EntryFields = tuple[int, int, int, int, int, int, bytes]
new_entry: Callable[[EntryFields], Entry] = functools.partial(tuple.__new__, Entry)


def entry_parts(
    order_ms: int, seq: int, topic_id: int, partition: int, source_offset: int, packed: bytes
) -> tuple[bytes, bytes]:
    """An entry as its header and its packed record, to be written one after the other
    (a writer gathers many without copying each record into a new string)."""
    return ENTRY.pack(order_ms, seq, topic_id, partition, source_offset, len(packed)), packed


def iter_entries(data: bytes, bucket_start_ms: int = 0) -> Iterator[tuple[int, Entry]]:
    """(end position, entry) for each whole entry in ``data``; a torn tail is left out."""
    view = memoryview(data)
    position, size = 0, len(data)
    unpack = ENTRY.unpack_from
    while position + ENTRY.size <= size:
        order, seq, topic_id, partition, offset, length = unpack(view, position)
        end = position + ENTRY.size + length
        if end > size:
            return
        packed = bytes(view[position + ENTRY.size : end])
        yield end, Entry(order, seq, bucket_start_ms, topic_id, partition, offset, packed)
        position = end
