"""Offsets by timestamp (ListOffsets), found through the segment indexes.

The indexes hold each batch's max timestamp, so only the batch that holds
the answer is read and decoded; Kafka answers at record granularity.
"""

from __future__ import annotations

from kshim.protocol.records import decode_records
from kshim.storage.partition_log import PartitionLog
from kshim.storage.segment import Segment


async def offset_for_timestamp(log: PartitionLog, timestamp: int) -> tuple[int, int] | None:
    """Returns (offset, timestamp) of the first visible record stamped >= ``timestamp``."""
    for segment in list(log.segments):
        if segment.max_timestamp < timestamp:
            continue
        first = segment.first_batch_with_timestamp(timestamp)
        for index in range(
            first if first is not None else len(segment.batch_offsets), len(segment.batch_offsets)
        ):
            if segment.batch_offsets[index] >= log.high_watermark:
                return None
            if segment.batch_max_timestamps[index] < timestamp:
                continue
            found = await _first_record_at_or_after(log, segment, index, timestamp)
            if found is not None:
                return found
    return None


async def _first_record_at_or_after(
    log: PartitionLog, segment: Segment, index: int, timestamp: int
) -> tuple[int, int] | None:
    header, records = decode_records(await log.read_batch_at(segment, index))
    if header.is_control:
        return None
    for record in records:
        if record.offset >= log.log_start_offset and record.timestamp >= timestamp:
            return record.offset, record.timestamp
    return None


async def offset_of_max_timestamp(log: PartitionLog) -> tuple[int, int] | None:
    """Returns (offset, timestamp) of the earliest visible record with the largest timestamp."""
    best: tuple[int, Segment, int] | None = None  # (max timestamp, segment, batch index)
    for segment in list(log.segments):
        for index, max_timestamp in enumerate(segment.batch_max_timestamps):
            visible = log.log_start_offset <= segment.batch_offsets[index] < log.high_watermark
            if visible and (best is None or max_timestamp > best[0]):
                best = (max_timestamp, segment, index)
    if best is None:
        return None
    return await _first_record_at_or_after(log, best[1], best[2], best[0])
