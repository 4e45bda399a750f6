"""What every log store must do, run over each one (tests/storage/conformance.py).

Offsets and watermarks, reads (KIP-74's at-least-one-batch, upper bounds,
OffsetOutOfRange), high-watermark listeners, the log start offset,
retention's segment view and dropping, and the store's open, close, reopen
and delete; offsets by timestamp are in test_log_store_conformance_timestamps.py.
Only the ``interface`` protocols are used, so a test passing here passes for
the broker whichever store it is given.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from kshim.protocol.record_batch import BatchHeader, validate_produced
from kshim.protocol.records import BatchSpec
from kshim.storage.interface import LogConfig, OffsetOutOfRange, TopicPartition
from kshim.storage.retention import NO_LIMIT, SegmentSummary, plan_retention
from tests.storage.conformance import Harness
from tests.storage.support import (
    UNBOUNDED,
    Read,
    append_durable,
    batch_bases,
    producer_batch,
    read_bytes,
    read_everything,
    values_of,
)

# Offsets, reads and watermarks.


async def test_new_log_is_empty(harness: Harness) -> None:
    log = await harness.open()
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert await read_bytes(log, 0) == Read(b"", 0)
    assert log.segment_summaries() == [SegmentSummary(0, 0, 0, -1)]


async def test_appends_get_dense_offsets_and_read_back(harness: Harness) -> None:
    log = await harness.open()
    bases = [await append_durable(log, count, f"b{count}") for count in (1, 3, 2, 5)]
    assert bases == [0, 1, 4, 6]
    assert log.log_end_offset == log.high_watermark == 11
    data = await read_everything(log)
    assert batch_bases(data) == bases
    assert [offset for offset, _ in values_of(data)] == list(range(11))
    assert values_of(data)[1:4] == [(1, b"b3-0"), (2, b"b3-1"), (3, b"b3-2")]


async def test_stored_batches_are_stamped_and_still_valid(harness: Harness) -> None:
    log = await harness.open()
    await append_durable(log, 2)
    original, header = producer_batch(4, label="x")
    unchanged = bytes(original)
    log.append(original, header)
    assert original == unchanged  # the caller's bytes are not stamped in place
    await log.wait_durable(5)
    stored = (await read_bytes(log, 2)).data
    stored_header = validate_produced(stored)  # the CRC does not cover what was stamped
    assert (stored_header.base_offset, stored_header.partition_leader_epoch) == (2, 0)
    assert stored[16:] == bytes(original[16:])


async def test_read_at_batch_boundaries_and_inside_batches(harness: Harness) -> None:
    log = await harness.open()
    for count in (1, 4, 1, 3):  # batches at 0, 1-4, 5, 6-8
        await append_durable(log, count)
    expected = {0: 0, 1: 1, 2: 1, 3: 1, 4: 1, 5: 5, 6: 6, 7: 6, 8: 6}
    for offset, base in expected.items():
        result = await read_bytes(log, offset, 1)  # one batch only
        assert batch_bases(result.data) == [base], offset
        assert result.end_offset == {0: 1, 1: 5, 5: 6, 6: 9}[base]
    last = await read_bytes(log, 8)  # no byte limit: the batch holding 8 is still the last
    assert (batch_bases(last.data), last.end_offset) == ([6], 9)
    assert await read_bytes(log, 9) == Read(b"", 9)


async def test_max_bytes_is_honoured_with_at_least_one_batch(harness: Harness) -> None:
    """KIP-74: a batch larger than the limit still comes back, alone."""
    log = await harness.open()
    for _ in range(5):
        await append_durable(log, 2)
    one = len(producer_batch(2)[0])
    for max_bytes in (0, 1, one - 1, one, 2 * one - 1):
        assert len((await read_bytes(log, 0, max_bytes)).data) == one
    two = await read_bytes(log, 0, 2 * one + one // 2)
    assert (batch_bases(two.data), two.end_offset) == ([0, 2], 4)
    assert (await read_bytes(log, 3, 3 * one)).end_offset == 8


async def test_upper_offset_bounds_the_read(harness: Harness) -> None:
    log = await harness.open()
    for _ in range(4):
        await append_durable(log, 2)  # batches at 0, 2, 4, 6
    bounded = await read_bytes(log, 0, upper_offset=4)
    assert (batch_bases(bounded.data), bounded.end_offset) == ([0, 2], 4)
    mid = await read_bytes(log, 2, upper_offset=5)  # a batch starting below is whole
    assert batch_bases(mid.data) == [2, 4]
    assert await read_bytes(log, 4, upper_offset=4) == Read(b"", 4)
    assert (await read_bytes(log, 0, upper_offset=1000)).end_offset == 8  # high watermark


async def test_offset_out_of_range_and_the_log_start_offset(harness: Harness) -> None:
    log = await harness.open()
    for _ in range(3):
        await append_durable(log, 2)
    for outside in (7, -1):
        with pytest.raises(OffsetOutOfRange):
            await log.read(outside, UNBOUNDED)
    log.advance_log_start_offset(3)
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRange):
        await log.read(2, UNBOUNDED)
    assert batch_bases((await read_bytes(log, 3)).data) == [2, 4]  # the batch holding it
    log.advance_log_start_offset(1)  # never backwards
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRange):
        log.advance_log_start_offset(7)
    log.advance_log_start_offset(6)  # up to the high watermark: an empty log
    assert await read_bytes(log, 6) == Read(b"", 6)


async def test_high_watermark_waits_for_durability(harness: Harness) -> None:
    log = await harness.open()
    advanced: list[int] = []
    log.listeners.append(lambda: advanced.append(log.high_watermark))
    batch, header = producer_batch(3)
    assert log.append(batch, header) == 0
    assert (log.log_end_offset, log.high_watermark) == (3, 0)
    assert await read_bytes(log, 0) == Read(b"", 0)  # not durable yet: invisible
    with pytest.raises(OffsetOutOfRange):
        await log.read(1, UNBOUNDED)
    assert await log.offset_for_timestamp(0) is None
    await log.wait_durable(2)
    assert (log.high_watermark, advanced) == (3, [3])
    await asyncio.wait_for(log.wait_durable(0), 0.1)  # already durable: at once


async def test_listeners_hear_of_durable_data_before_the_producers(harness: Harness) -> None:
    """Long-polling fetches (listeners) are woken before the appends' acknowledgements, so
    the consumer's answer is not queued behind the producer's."""
    log = await harness.open()
    woken: list[str] = []
    fetch_wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake_fetch() -> None:
        if not fetch_wake.done():
            fetch_wake.set_result(None)

    log.listeners.append(wake_fetch)

    async def fetch() -> None:
        await fetch_wake
        woken.append("fetch")

    async def produce() -> None:
        log.append(*producer_batch(3))
        await log.wait_durable(2)
        woken.append("acknowledgement")

    await asyncio.wait_for(asyncio.gather(fetch(), produce()), 10)
    assert woken == ["fetch", "acknowledgement"]


async def test_concurrent_appends_are_all_acknowledged_in_order(harness: Harness) -> None:
    log = await harness.open()
    seen: list[int] = []
    log.listeners.append(lambda: seen.append(log.high_watermark))

    async def produce(index: int) -> int:
        for _ in range(index % 3):
            await asyncio.sleep(0)
        batch, header = producer_batch(2, label=f"p{index}")
        base_offset = log.append(batch, header)
        await log.wait_durable(base_offset + 1)
        assert log.high_watermark >= base_offset + 2
        return base_offset

    bases = await asyncio.gather(*(produce(index) for index in range(12)))
    assert sorted(bases) == list(range(0, 24, 2))
    assert seen == sorted(seen) and seen[-1] == log.high_watermark == 24
    assert len(values_of(await read_everything(log))) == 24


# Segments: the roll rule, and retention over them.


async def test_segments_roll_by_size(harness: Harness) -> None:
    one = len(producer_batch(2, label="r0")[0])
    log = await harness.open(LogConfig(segment_bytes=3 * one))
    for index in range(10):
        await append_durable(log, 2, f"r{index}", timestamp=1000 + 10 * index)
    assert log.segment_summaries() == [
        SegmentSummary(0, 6, 3 * one, 1021),
        SegmentSummary(6, 12, 3 * one, 1051),
        SegmentSummary(12, 18, 3 * one, 1081),
        SegmentSummary(18, 20, one, 1091),
    ]
    data = await read_everything(log)
    assert [offset for offset, _ in values_of(data)] == list(range(20))
    assert values_of(data)[13] == (13, b"r6-1")


async def test_an_oversized_batch_gets_a_segment_of_its_own(harness: Harness) -> None:
    log = await harness.open(LogConfig(segment_bytes=100))
    for _ in range(3):
        await append_durable(log, 5)  # each batch is larger than segment_bytes
    assert [summary.base_offset for summary in log.segment_summaries()] == [0, 5, 10]
    assert [offset for offset, _ in values_of(await read_everything(log))] == list(range(15))


async def test_segments_roll_by_age(harness: Harness) -> None:
    log = await harness.open(LogConfig(segment_ms=1000))
    await append_durable(log, 1)
    harness.clock.now_ms += 999
    await append_durable(log, 1)
    assert len(log.segment_summaries()) == 1
    harness.clock.now_ms += 1
    await append_durable(log, 1)
    assert [summary.base_offset for summary in log.segment_summaries()] == [0, 2]


async def test_a_new_config_applies_to_later_appends(harness: Harness) -> None:
    log = await harness.open()
    await append_durable(log, 1)
    log.config = replace(log.config, segment_bytes=1)  # AlterConfigs
    await append_durable(log, 1)
    await append_durable(log, 1)
    assert [summary.base_offset for summary in log.segment_summaries()] == [0, 1, 2]


async def test_dropping_the_oldest_segments(harness: Harness) -> None:
    log = await harness.open(LogConfig(segment_bytes=1))  # one batch per segment
    for index in range(5):
        await append_durable(log, 2, f"d{index}")  # segments at 0, 2, 4, 6, 8
    summaries = log.segment_summaries()
    await log.drop_oldest_segments(2, 0)
    assert log.segment_summaries() == summaries[2:]
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange):
        await log.read(3, UNBOUNDED)
    assert [offset for offset, _ in values_of(await read_everything(log))] == list(range(4, 10))
    await log.drop_oldest_segments(1, 7)  # a log start offset beyond the first kept segment
    assert (log.segment_summaries()[0].base_offset, log.log_start_offset) == (6, 7)
    await log.drop_oldest_segments(0, 0)
    await log.drop_oldest_segments(99, 0)  # never the active segment
    assert log.segment_summaries() == summaries[-1:]
    assert (log.log_start_offset, log.high_watermark) == (8, 10)
    assert await append_durable(log, 1) == 10


async def test_retention_plans_over_the_segment_view(harness: Harness) -> None:
    """The broker's retention pass: plan over the summaries, then drop (UnifiedLog's
    deleteRetentionMsBreachedSegments)."""
    log = await harness.open(LogConfig(segment_bytes=1))
    for index in range(4):
        await append_durable(log, 1, timestamp=1000 * (index + 1))  # 1000 ... 4000
    plan = plan_retention(log.segment_summaries(), log.log_start_offset, 3500, 1000, NO_LIMIT)
    assert (plan.drop_count, plan.log_start_offset) == (2, 2)
    await log.drop_oldest_segments(plan.drop_count, plan.log_start_offset)
    assert log.log_start_offset == 2
    assert await log.offset_for_timestamp(0) == (2, 3000)
    reopened = await harness.reopen(LogConfig(segment_bytes=1), log_start_offset=2)
    assert [summary.base_offset for summary in reopened.segment_summaries()] == [2, 3]
    assert [offset for offset, _ in values_of(await read_everything(reopened))] == [2, 3]


# The store: open, close, reopen, delete.


async def test_reopen_recovers_identical_offsets_bytes_and_segments(harness: Harness) -> None:
    one = len(producer_batch(3, label="o0")[0])
    config = LogConfig(segment_bytes=2 * one)
    log = await harness.open(config)
    for index in range(7):
        await append_durable(log, 3, f"o{index}")
    before = (await read_everything(log), log.segment_summaries())
    reopened = await harness.reopen(config)
    assert (reopened.log_end_offset, reopened.high_watermark) == (21, 21)
    assert (await read_everything(reopened), reopened.segment_summaries()) == before
    assert await append_durable(reopened, 1, "after") == 21
    assert values_of(await read_everything(reopened, 21)) == [(21, b"after-0")]


async def test_reopen_keeps_a_stored_log_start_offset(harness: Harness) -> None:
    log = await harness.open()
    for _ in range(3):
        await append_durable(log, 2)
    reopened = await harness.reopen(log_start_offset=4)
    assert reopened.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange):
        await reopened.read(3, UNBOUNDED)


async def test_an_empty_log_starts_at_its_log_start_offset(harness: Harness) -> None:
    log = await harness.open(log_start_offset=100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert await append_durable(log, 2) == 100
    assert log.segment_summaries()[0].base_offset == 100


async def test_close_makes_pending_appends_durable(harness: Harness) -> None:
    log = await harness.open()
    for _ in range(3):
        log.append(*producer_batch(2))
    reopened = await harness.reopen()  # no wait_durable: the close must still keep them
    assert reopened.log_end_offset == 6
    assert batch_bases(await read_everything(reopened)) == [0, 2, 4]


async def test_reopen_reports_recovered_producer_batches(harness: Harness) -> None:
    log = await harness.open()
    for count, sequence in ((2, 0), (3, 2)):
        spec = BatchSpec(producer_id=42, producer_epoch=1, base_sequence=sequence)
        base_offset = log.append(*producer_batch(count, spec=spec))
        await log.wait_durable(base_offset + count - 1)
    await append_durable(log, 1)  # no producer id: recovery need not report it
    seen: list[BatchHeader] = []
    reopened = await harness.reopen(on_batch=seen.append)
    reported = [
        (header.base_offset, header.producer_epoch, header.base_sequence, header.last_offset)
        for header in seen
        if header.producer_id == 42
    ]
    assert reported == [(0, 1, 0, 1), (2, 1, 2, 4)]
    assert reopened.log_end_offset == 6


async def test_delete_forgets_one_partition(harness: Harness) -> None:
    other = TopicPartition("other", 0)
    log = await harness.open()
    kept = await harness.open(topic_partition=other)
    await append_durable(log, 2)
    await append_durable(kept, 3)
    await harness.store.delete(log.topic_partition)
    await harness.store.delete(TopicPartition("unknown", 0))  # nothing to delete: no error
    recreated = await harness.open()
    assert (recreated.log_start_offset, recreated.log_end_offset) == (0, 0)
    assert await append_durable(recreated, 1) == 0
    await harness.store.close()
    assert (await harness.open(topic_partition=other)).log_end_offset == 3
