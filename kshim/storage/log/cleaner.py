"""One compaction pass over stored batches: the key map, then each batch cleaned.

Kafka's Cleaner (LogCleaner.scala, now storage/.../Cleaner.java), pure: the stores feed it
batches and take the cleaned ones (disk_compaction.py, memory_log.py). Run it in a worker
thread: it decodes every record of the log.

- ``build_offset_map`` reads the dirty part of the log and puts, for each key, its latest
  offset; control batches and aborted transactions' batches put nothing.
- ``BatchCleaner.clean`` then rewrites each batch from the log's first one: a record stays
  if it is past the map's end, or is its key's latest and has a value, or is a tombstone
  whose batch's delete horizon has not passed (KIP-534: the first pass that keeps a
  tombstone sets the horizon to now + ``delete.retention.ms``, so tombstones outlive the
  cleaner's first look at them by that much). Records without a key go, as in Kafka.
  Aborted transactions' batches go. A transaction marker stays while any batch of its
  transaction is still in the log, then gets a horizon, and goes once that passed. A batch
  left with no record goes too, unless it is the last batch of an idempotent producer: it
  stays empty, keeping the producer's sequence (Kafka's RETAIN_EMPTY).
- ``SegmentRewrite`` assembles the cleaned segment: a batch kept keeps its offsets, and
  each range of offsets whose batches went is covered by one empty batch
  (``record_batch.empty_batch``), so the segment stays dense: its batches follow on from
  its base to its old next offset. Readers then never land between batches, recovery's
  checks still hold, and a fetch at a removed offset gets that empty batch and the next
  record after it (consumers move past an empty batch, as past Kafka's emptied ones).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kshim.protocol.keyed_records import KeyedRecord, keyed_records, retained_batch
from kshim.protocol.record_batch import BatchHeader, empty_batch, read_header
from kshim.storage.compaction import (
    AbortedRange,
    CompactionPlan,
    CompactionRequest,
    is_aborted_batch,
)
from kshim.storage.log.index_file import IndexEntry
from kshim.storage.log.offset_map import OffsetMap
from kshim.storage.log.sealed_index import pack_producer
from kshim.storage.log.segment import Segment, SegmentT

# The widest range one empty batch may cover: its last offset delta is an int32.
MAX_FILLER_SPAN = (1 << 31) - 1
# Cleaned bytes collected before they are handed to the sink (a file write).
OUTPUT_CHUNK_BYTES = 8 << 20

BatchSource = Callable[[SegmentT], Iterable[memoryview]]  # a segment's batches, in order


@dataclass(frozen=True, slots=True)
class CleaningRules:
    now_ms: int
    delete_retention_ms: int
    aborted: Sequence[AbortedRange]
    producer_last_offsets: frozenset[int]


def _is_aborted(header: BatchHeader, aborted: Sequence[AbortedRange]) -> bool:
    return is_aborted_batch(
        header.producer_id, header.base_offset, header.is_transactional, aborted
    )


def build_offset_map(
    segments: Sequence[SegmentT],
    batches: BatchSource[SegmentT],
    start: int,
    upper: int,
    offset_map: OffsetMap,
    aborted: Sequence[AbortedRange],
) -> None:
    """Maps the keys of the records in [start, upper) of ``segments`` (oldest first), until
    the map is full; ``offset_map.latest_offset`` then says how far it got."""
    for segment in segments:
        if segment.next_offset <= start or segment.base_offset >= upper:
            continue
        for batch in batches(segment):
            header = read_header(batch)
            if header.next_offset <= start:
                continue
            if header.base_offset >= upper:
                return
            if not header.is_control and not _is_aborted(header, aborted):
                for record in keyed_records(batch, header):
                    if record.offset >= start and not offset_map.put(record.key, record.offset):
                        return  # full: the next pass goes on from here
            offset_map.covered(header.last_offset)
        offset_map.covered(segment.next_offset - 1)  # a gap at the segment's end


class BatchCleaner:
    """Cleans the batches of one pass in offset order, from the log's first; keeps what it
    learns of transactions from batch to batch (Kafka's CleanedTransactionMetadata)."""

    def __init__(self, rules: CleaningRules, offset_map: OffsetMap) -> None:
        self._rules = rules
        self._map = offset_map
        # Producers with a transactional batch read since their last marker: that marker's
        # transaction still has batches in the log, so it must stay.
        self._open: set[int] = set()
        self.kept_records = 0
        self.removed_records = 0

    def clean(self, batch: memoryview) -> bytes | memoryview | None:
        """The batch as it stays (itself when unchanged, a rewritten one otherwise), or
        None when it goes."""
        header = read_header(batch)
        if header.is_control:
            return self._marker(batch, header)
        if header.is_transactional:
            self._open.add(header.producer_id)
            if _is_aborted(header, self._rules.aborted):
                self.removed_records += header.records_count
                return self._emptied(batch, header)
        return self._records(batch, header)

    def _new_horizon(self) -> int:
        return self._rules.now_ms + self._rules.delete_retention_ms

    def _marker(self, batch: memoryview, header: BatchHeader) -> bytes | memoryview | None:
        self.kept_records += 1
        if header.producer_id in self._open:
            self._open.discard(header.producer_id)
            return batch  # its transaction's batches are still there
        horizon = header.delete_horizon
        if horizon is None:
            return retained_batch(header, list(keyed_records(batch, header)), self._new_horizon())
        if horizon <= self._rules.now_ms:
            self.kept_records -= 1
            self.removed_records += 1
            return None
        return batch

    def _records(self, batch: memoryview, header: BatchHeader) -> bytes | memoryview | None:
        horizon = header.delete_horizon
        keep_tombstones = horizon is None or self._rules.now_ms < horizon
        kept = [
            record
            for record in keyed_records(batch, header)
            if self._keeps(record, keep_tombstones)
        ]
        self.kept_records += len(kept)
        self.removed_records += header.records_count - len(kept)
        if not kept:
            return self._emptied(batch, header)
        has_tombstones = any(record.is_tombstone for record in kept)
        if horizon is None and has_tombstones:
            horizon = self._new_horizon()
        elif len(kept) == header.records_count:
            return batch
        return retained_batch(header, kept, horizon)

    def _keeps(self, record: KeyedRecord, keep_tombstones: bool) -> bool:
        if record.offset > self._map.latest_offset:
            return True  # past what the map covers: not known to be superseded
        latest = record.offset >= self._map.get(record.key)
        return latest and (keep_tombstones or not record.is_tombstone)

    def _emptied(self, batch: memoryview, header: BatchHeader) -> bytes | memoryview | None:
        """A batch with no record left: kept empty if it is an idempotent producer's last
        (itself, when an earlier pass emptied it already)."""
        if header.has_producer_id and header.last_offset in self._rules.producer_last_offsets:
            if header.records_count == 0:
                return batch
            return retained_batch(header, [], header.delete_horizon)
        return None


class SegmentRewrite:
    """The cleaned segment of one group, assembled batch by batch: its index (``segment``,
    its producer columns) and its bytes, handed to ``sink`` every OUTPUT_CHUNK_BYTES. Its
    memory is the index's: 48 bytes a batch."""

    def __init__(self, segment: Segment, sink: Callable[[list[bytes | memoryview]], None]) -> None:
        self.segment = segment  # new and empty: its index is built here
        self.producer_ids = array("q")  # the sealed index's producer columns
        self.producers = array("q")
        self.changed = False  # whether any batch differs from the old segments'
        self.read_bytes = 0
        self._sink = sink
        self._pending: list[bytes | memoryview] = []
        self._pending_bytes = 0
        self._gap_start: int | None = None  # the first offset of a removed range

    def add(self, original: memoryview, cleaned: bytes | memoryview | None) -> None:
        """One old batch and what ``BatchCleaner.clean`` made of it."""
        self.read_bytes += len(original)
        if cleaned is None:
            header = read_header(original)
            # An empty batch an earlier pass left over a removed range comes out the same,
            # unless what it is merged with changed.
            self.changed |= not _is_filler(header)
            if self._gap_start is None:
                self._gap_start = header.base_offset
            return
        header = read_header(cleaned)
        self._close_gap(header.base_offset)
        self.changed |= cleaned is not original
        self._append(bytes(cleaned), header)

    def finish(self, next_offset: int) -> None:
        """Every old batch was added; the segment ends at ``next_offset``, the old one's."""
        if self._gap_start is None and self.segment.next_offset < next_offset:
            self._gap_start = self.segment.next_offset
        self._close_gap(next_offset)
        self._flush()

    def _close_gap(self, next_offset: int) -> None:
        start, self._gap_start = self._gap_start, None
        if start is None:
            return
        while start < next_offset:
            span = min(next_offset - start, MAX_FILLER_SPAN)
            filler = empty_batch(start, span - 1)
            self._append(filler, read_header(filler))
            start += span

    def _append(self, data: bytes, header: BatchHeader) -> None:
        position = self.segment.add_batch(
            header.base_offset, len(data), header.next_offset, header.max_timestamp
        )
        self.producer_ids.append(header.producer_id)
        self.producers.append(pack_producer(IndexEntry.of(header, header.base_offset, position)))
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= OUTPUT_CHUNK_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._sink(self._pending)
        self._pending = []
        self._pending_bytes = 0


def _is_filler(header: BatchHeader) -> bool:
    """Whether a batch is one a pass wrote over a removed range (``empty_batch``)."""
    return header.records_count == 0 and not header.has_producer_id and not header.is_control


def start_pass(
    segments: Sequence[SegmentT],
    batches: BatchSource[SegmentT],
    plan: CompactionPlan,
    request: CompactionRequest,
) -> tuple[BatchCleaner, list[SegmentT], int]:
    """Maps the dirty part of the log (``segments``, oldest first); returns the cleaner,
    the segments to rewrite (from the first to the one where the map ended) and the next
    pass's first dirty offset."""
    offset_map = OffsetMap(request.offset_map_capacity)
    first_dirty, upper = plan.first_dirty_offset, plan.first_uncleanable_offset
    offset_map.covered(first_dirty - 1)  # the clean part: its records were judged before
    build_offset_map(segments, batches, first_dirty, upper, offset_map, request.aborted)
    end = min(max(offset_map.latest_offset + 1, first_dirty), upper)
    rules = CleaningRules(
        request.now_ms,
        request.policy.delete_retention_ms,
        request.aborted,
        request.producer_last_offsets,
    )
    to_clean = [segment for segment in segments if segment.base_offset < end]
    return BatchCleaner(rules, offset_map), to_clean, end


def clean_segments(
    segments: Sequence[SegmentT],
    batches: BatchSource[SegmentT],
    cleaner: BatchCleaner,
    rewrite: SegmentRewrite,
) -> None:
    """Cleans every batch of ``segments`` (one group) into ``rewrite``."""
    for segment in segments:
        for batch in batches(segment):
            rewrite.add(batch, cleaner.clean(batch))
    rewrite.finish(segments[-1].next_offset)
