"""Offsets by timestamp (ListOffsets, KIP-79), found through segment indexes.

Every segment, on disk or in memory, indexes each batch's max timestamp and
a running max of them (the time index, as Kafka's TimeIndex), so a lookup
scans headers only and reads and decodes just the batch that holds the
answer; Kafka answers at record granularity. Each store says how to read one
batch of a segment.

Control batches count like any other, as in Kafka: its time index and a segment's
largest timestamp take every appended batch, transaction markers included, so right
after a commit the marker (stamped when it was written) is usually the record with the
largest timestamp, and a lookup past a transaction's data finds its marker. Apache Kafka
3.9 answers both that way (compat_tests/test_list_offsets_timestamps.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from kshim.protocol.records import decode_records
from kshim.storage.interface import TimestampHit
from kshim.storage.log.segment import SegmentT

# Reads the bytes of batch ``index`` of a segment.
ReadBatch = Callable[[SegmentT, int], Awaitable[bytes]]


async def first_record_at_or_after(
    segments: Sequence[SegmentT],
    read_batch: ReadBatch[SegmentT],
    visible: range,
    timestamp: int,
) -> TimestampHit | None:
    """The first record in ``visible`` (log start to high watermark) stamped >= ``timestamp``,
    a control record included."""
    for segment in list(segments):  # a copy: retention may drop segments meanwhile
        if segment.max_timestamp < timestamp:
            continue
        first = segment.first_batch_with_timestamp(timestamp)
        count = len(segment.batch_offsets)
        for index in range(count if first is None else first, count):
            if segment.batch_offsets[index] >= visible.stop:
                return None
            if segment.batch_max_timestamps[index] < timestamp:
                continue
            found = await _first_record(read_batch, segment, index, visible, timestamp)
            if found is not None:
                return found
    return None


async def record_with_max_timestamp(
    segments: Sequence[SegmentT], read_batch: ReadBatch[SegmentT], visible: range
) -> TimestampHit | None:
    """The earliest record in ``visible`` with the largest timestamp, a control record
    (a transaction marker) included."""
    best: tuple[int, SegmentT, int] | None = None  # (max timestamp, segment, batch index)
    for segment in list(segments):
        for index, max_timestamp in enumerate(segment.batch_max_timestamps):
            if segment.batch_offsets[index] in visible and (
                best is None or max_timestamp > best[0]
            ):
                best = (max_timestamp, segment, index)
    if best is None:
        return None
    return await _first_record(read_batch, best[1], best[2], visible, best[0])


async def _first_record(
    read_batch: ReadBatch[SegmentT], segment: SegmentT, index: int, visible: range, timestamp: int
) -> TimestampHit | None:
    _, records = decode_records(await read_batch(segment, index))
    for record in records:
        if record.offset >= visible.start and record.timestamp >= timestamp:
            return record.offset, record.timestamp
    return None
