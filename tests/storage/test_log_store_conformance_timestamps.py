"""Offsets by timestamp (ListOffsets, KIP-79 and KIP-734's max timestamp) over every log store.

Answers are at record granularity, among visible records only: from the log
start offset to the high watermark, control records included (as Kafka's time index).
"""

from __future__ import annotations

import pytest

from kshim.protocol.record_batch import read_header, set_log_append_time
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.interface import LogConfig, PartitionLog
from tests.storage.conformance import Harness
from tests.storage.support import DEFAULT_CONFIG, append_durable, producer_batch


async def log_with_timestamps(harness: Harness, config: LogConfig = DEFAULT_CONFIG) -> PartitionLog:
    """Batches at 0 (ts 1000-1002), 3 (ts 500-501), 5 (ts 2000-2003), 9 (ts 1500)."""
    log = await harness.open(config)
    for count, timestamp in ((3, 1000), (2, 500), (4, 2000), (1, 1500)):
        await append_durable(log, count, timestamp=timestamp)
    return log


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        (0, (0, 1000)),
        (1000, (0, 1000)),
        (1001, (1, 1001)),  # inside the first batch: record granularity
        (1002, (2, 1002)),
        (1003, (5, 2000)),  # the first offset stamped at or after, not the nearest
        (1500, (5, 2000)),
        (2002, (7, 2002)),
        (2003, (8, 2003)),
        (2004, None),
    ],
)
async def test_offset_for_timestamp(
    harness: Harness, timestamp: int, expected: tuple[int, int] | None
) -> None:
    log = await log_with_timestamps(harness)
    assert await log.offset_for_timestamp(timestamp) == expected


async def test_offset_for_timestamp_across_segments(harness: Harness) -> None:
    log = await log_with_timestamps(harness, LogConfig(segment_bytes=1))  # a batch each
    assert len(log.segment_summaries()) == 4
    assert await log.offset_for_timestamp(1800) == (5, 2000)
    assert await log.offset_for_timestamp(501) == (0, 1000)


async def test_offset_for_timestamp_skips_records_below_log_start(harness: Harness) -> None:
    log = await log_with_timestamps(harness)
    log.advance_log_start_offset(2)
    assert await log.offset_for_timestamp(0) == (2, 1002)
    log.advance_log_start_offset(3)
    assert await log.offset_for_timestamp(1000) == (5, 2000)


async def test_timestamp_lookups_ignore_batches_not_yet_durable(harness: Harness) -> None:
    log = await log_with_timestamps(harness)
    log.append(*producer_batch(1, timestamp=9000))
    assert await log.offset_for_timestamp(9000) is None
    assert await log.offset_of_max_timestamp() == (8, 2003)
    await log.wait_durable(10)
    assert await log.offset_for_timestamp(9000) == (10, 9000)
    assert await log.offset_of_max_timestamp() == (10, 9000)


async def test_timestamp_lookups_count_control_batches(harness: Harness) -> None:
    """As Kafka's time index does: a transaction marker is a record like any other here
    (Kafka 3.9 answers a lookup past a transaction's data with its marker)."""
    log = await log_with_timestamps(harness)
    attributes = 0x30  # transactional and control: a commit marker (KIP-98)
    key, value = b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"  # COMMIT, epoch 0
    spec = BatchSpec(attributes=attributes, producer_id=7, producer_epoch=0)
    marker = bytearray(build_batch([Record(0, 5000, key, value)], spec))
    await log.wait_durable(log.append(marker, read_header(marker)))
    await append_durable(log, 1, timestamp=4000)
    assert await log.offset_for_timestamp(3000) == (10, 5000)
    assert await log.offset_for_timestamp(5001) is None
    assert await log.offset_of_max_timestamp() == (10, 5000)


async def test_offset_of_max_timestamp(harness: Harness) -> None:
    log = await log_with_timestamps(harness, LogConfig(segment_bytes=1))
    assert await log.offset_of_max_timestamp() == (8, 2003)


async def test_offset_of_max_timestamp_prefers_the_earliest(harness: Harness) -> None:
    log = await harness.open()
    for timestamp in (100, 700, 300, 700):
        await append_durable(log, 1, timestamp=timestamp)
    assert await log.offset_of_max_timestamp() == (1, 700)


async def test_timestamp_lookups_on_an_empty_log(harness: Harness) -> None:
    log = await harness.open()
    assert await log.offset_for_timestamp(0) is None
    assert await log.offset_of_max_timestamp() is None


async def test_timestamp_lookups_after_retention(harness: Harness) -> None:
    log = await log_with_timestamps(harness, LogConfig(segment_bytes=1))
    await log.drop_oldest_segments(2, 0)  # offsets 0-4 are gone
    assert await log.offset_for_timestamp(0) == (5, 2000)
    assert await log.offset_of_max_timestamp() == (8, 2003)


async def test_log_append_time_batches_are_found_by_append_time(harness: Harness) -> None:
    log = await harness.open()
    batch, _ = producer_batch(3, timestamp=10)
    set_log_append_time(batch, 5000)
    log.append(batch, read_header(batch))
    await log.wait_durable(2)
    assert await log.offset_for_timestamp(11) == (0, 5000)
    assert await log.offset_of_max_timestamp() == (0, 5000)
