"""Reading ``T.full``: offsets, fetched batches and timestamp lookups from the store.

Live records are stored as one-record batches at their original offsets. On
the way out each batch's last-offset field is widened up to the next live
record (or the view's high watermark), as Kafka's cleaner keeps the batch
boundaries of removed records, so a consumer's position always moves across
superseded records; a range with no live record at all is sent as one empty
batch spanning it. Java consumers and Spark, which read up to the high
watermark, thus never stall on a superseded tail. LMDB reads run in
worker threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from kshim.broker.full_view.view import FullView
from kshim.broker.partition_reads import PartitionOffsets, TimestampHit
from kshim.protocol.record_batch import empty_batch, read_header, set_last_offset_delta
from kshim.storage.interface import TopicPartition
from kshim.storage.views.full_view_store import FullViewStore, StoredRecord


@dataclass(frozen=True, slots=True)
class ViewRead:
    offsets: PartitionOffsets
    batches: tuple[bytes, ...]  # empty when out of range
    out_of_range: bool = False


async def view_offsets(view: FullView, source: TopicPartition) -> PartitionOffsets:
    """Log start and high watermark, which is also the last stable offset: the view holds
    committed data only.

    The log start is where the view was built from (0, or the source's log start when it
    was rebuilt), not its first live record: like a topic that Kafka's cleaner compacts,
    whose log start only retention moves. A log start that followed superseded records
    would pass streaming readers that are behind, and Spark's connector takes that for
    lost data and stops (failOnDataLoss); a reader below the first live record loses
    nothing, it is sent the next live record.
    """
    high_watermark = await view.applied_position(source)
    start = await view.start_offset(source)
    return PartitionOffsets(min(start, high_watermark), high_watermark, high_watermark)


async def read_view(
    view: FullView, source: TopicPartition, fetch_offset: int, max_bytes: int
) -> ViewRead:
    """Batches from ``fetch_offset`` up to the high watermark, at least one when any.

    Out of range only below 0 or past the high watermark: a fetch below the
    first live record starts at it, as after compaction.
    """
    offsets = await view_offsets(view, source)
    if fetch_offset < 0 or fetch_offset > offsets.high_watermark:
        return ViewRead(offsets, (), out_of_range=True)
    batches = await asyncio.to_thread(
        widened_batches, view.store, source, fetch_offset, max_bytes,
        offsets.high_watermark,
    )  # fmt: skip
    return ViewRead(offsets, batches)


def widened_batches(
    store: FullViewStore, source: TopicPartition, start: int, max_bytes: int, upper: int
) -> tuple[bytes, ...]:
    """Worker thread: the stored batches from ``start`` below ``upper`` (the high
    watermark), each widened to reach the next one; also read by the gateway's index."""
    if start >= upper:
        return ()
    records, next_offset = store.read(source, start, upper, max_bytes)
    if not records:
        return (empty_batch(start, upper - start - 1),)
    ends = [record.offset for record in records[1:]] + [next_offset or upper]
    batches = []
    for record, end in zip(records, ends, strict=True):
        batch = bytearray(record.batch)
        set_last_offset_delta(batch, end - record.offset - 1)
        batches.append(bytes(batch))
    return tuple(batches)


async def offset_for_timestamp(
    view: FullView, source: TopicPartition, timestamp: int | None
) -> TimestampHit | None:
    """(offset, timestamp) of the first live record at or after ``timestamp``, or of the
    record with the largest timestamp when ``timestamp`` is None; None when none."""
    records = await asyncio.to_thread(view.store.live_records, source)
    high_watermark = await view.applied_position(source)
    return timestamp_hit(records, high_watermark, timestamp)


def timestamp_hit(
    records: Sequence[StoredRecord], high_watermark: int, timestamp: int | None
) -> TimestampHit | None:
    """``offset_for_timestamp``'s answer among the live ``records`` below the high
    watermark; also the gateway's index's."""
    stamped = [
        (record.offset, read_header(record.batch).max_timestamp)
        for record in records
        if record.offset < high_watermark
    ]
    if timestamp is None:
        return max(stamped, key=lambda item: (item[1], -item[0]), default=None)
    return next((item for item in stamped if item[1] >= timestamp), None)
