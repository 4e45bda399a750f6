"""What the delay schedule stores and hands out: pending records, turns of delivery, per
topic summaries, and the value layouts of its LMDB tables (their keys are in
kshim/storage/meta/lmdb_keys.py):

- a bucket's state (DELAY_BUCKETS_DB): ``int64 length, int64 split position, int64 mark
  order, int64 mark seq, int64 min seq``, then ``int32 topic id, int64 first order ms``
  per topic;
- a topic's lateness counts (DELAY_LATENESS_DB): one int64 per LATENESS_BOUNDS_MS bucket
  and one for later;
- the delivery under way (DELAY_TURN_KEY): ``encode_turn``;
- topic ids (DELAY_TOPICS_DB) are int32, the next seq and cancellations' seqs int64.
"""

from __future__ import annotations

import collections
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from kshim.storage.interface import TopicPartition
from kshim.storage.schedule.delay_filing import NO_MARK

# Upper bounds (ms) of the lateness buckets: delivered at most this long after the due time.
LATENESS_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 60_000)
LATENESS = struct.Struct(f">{len(LATENESS_BOUNDS_MS) + 1}q")  # the last: later than all
_META = struct.Struct(">qqqqq")  # length, split position, mark order, mark seq, min seq
_TOPIC_FIRST = struct.Struct(">iq")  # topic id, first order ms
TOPIC_ID = struct.Struct(">i")
SEQ = struct.Struct(">q")
_MARK = struct.Struct(">qqq")  # minute bucket start, order ms, seq
_TARGET = struct.Struct(">iqH")  # partition, log end offset, topic name length
_INT32 = TOPIC_ID
_INT64 = SEQ


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


def decode_bucket_state(value: bytes) -> BucketState:
    length, split_position, mark_order, mark_seq, min_seq = _META.unpack_from(value)
    first_due = dict(
        _TOPIC_FIRST.unpack_from(value, position)
        for position in range(_META.size, len(value), _TOPIC_FIRST.size)
    )
    return BucketState(length, split_position, (mark_order, mark_seq), min_seq, first_due)


def encode_turn(turn: Turn) -> bytes:
    """``int32 count`` and per minute bucket ``int64 start, int64 order ms, int64 seq`` (the
    marks), ``int32 count`` and per target ``int32 partition, int64 log end, uint16 name
    length`` and its topic name, then the records' seqs, int64 each."""
    parts = [_INT32.pack(len(turn.marks))]
    parts += [_MARK.pack(start, *mark) for start, mark in turn.marks.items()]
    parts.append(_INT32.pack(len(turn.from_offsets)))
    for target, from_offset in turn.from_offsets.items():
        name = target.topic.encode("utf-8")
        parts += [_TARGET.pack(target.partition, from_offset, len(name)), name]
    parts.append(b"".join(_INT64.pack(record.seq) for record in turn.records))
    return b"".join(parts)


def decode_turn(
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
