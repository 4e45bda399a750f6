"""Compaction, as every log store must do it (run over each one, tests/storage/conformance.py).

Kafka's semantics: records keep their offsets, a key's superseded records go, tombstones
go once their delete horizon passed, the active segment is never touched, and readers
cross the removed ranges: a read from an offset that went starts at the next record.
"""

from __future__ import annotations

from dataclasses import replace

from kshim.protocol import compression
from kshim.protocol.record_batch import iter_batches, read_header
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.compaction import CompactionPolicy
from kshim.storage.interface import LogConfig
from tests.storage.compaction_support import (
    DAY_MS,
    NOW_MS,
    ONE_BATCH_SEGMENTS,
    append,
    append_writes,
    compact,
    keyed_batch,
    latest_by_key,
    read_records,
    request,
)
from tests.storage.conformance import Harness
from tests.storage.support import read_bytes, read_everything

WRITES = [
    (b"a", b"a1"),  # 0: superseded by 3
    (b"b", b"b1"),  # 1: deleted by 5
    (None, b"keyless"),  # 2: keyless, removed as Kafka's cleaner removes it
    (b"a", b"a2"),  # 3
    (b"c", b"c1"),  # 4: superseded by 7, in the active segment
    (b"b", None),  # 5: tombstone
    (b"d", b"d1"),  # 6
    (b"c", b"c2"),  # 7: the active segment
]


async def test_compaction_keeps_each_keys_latest_record_at_its_offset(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, WRITES)
    before = await read_records(log)
    result = await compact(harness.store, log)
    assert result is not None and result.first_dirty_offset == 7
    after = await read_records(log)
    assert [(record.offset, record.key, record.value) for record in after] == [
        (3, b"a", b"a2"), (4, b"c", b"c1"), (5, b"b", None), (6, b"d", b"d1"), (7, b"c", b"c2"),
    ]  # fmt: skip
    originals = {record.offset: record for record in before}
    assert all(record == originals[record.offset] for record in after)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 8, 8)


async def test_the_active_segment_is_never_compacted(harness: Harness) -> None:
    log = await harness.open(LogConfig(memtable_bytes=0))  # one segment for everything
    await append_writes(log, [(b"k", b"%d" % index) for index in range(10)])
    assert await compact(harness.store, log) is None
    assert len(await read_records(log)) == 10


async def test_a_read_from_a_removed_offset_starts_at_the_next_record(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, [(b"k", b"%d" % index) for index in range(6)] + [(b"j", b"last")])
    await compact(harness.store, log)
    for offset in range(5):
        read = await read_bytes(log, offset)
        batches = [header for _, header in iter_batches(read.data)]
        assert batches[0].base_offset <= offset <= batches[0].last_offset
        records = [record for record in await read_records(log, offset) if record.offset >= offset]
        assert [record.offset for record in records] == [5, 6]
    assert [record.value for record in await read_records(log, 0)] == [b"5", b"last"]


async def test_tombstones_go_once_their_delete_horizon_passed(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, [(b"a", b"1"), (b"a", None), (b"z", b"1")])
    retention = 1_000
    await compact(harness.store, log, request(NOW_MS, retention))
    assert [(r.offset, r.value) for r in await read_records(log)] == [(1, None), (2, b"1")]
    await compact(harness.store, log, request(NOW_MS + retention - 1, retention))
    assert [(r.offset, r.value) for r in await read_records(log)] == [(1, None), (2, b"1")]
    await compact(harness.store, log, request(NOW_MS + retention, retention))
    assert [(r.offset, r.value) for r in await read_records(log)] == [(2, b"1")]
    assert log.log_end_offset == 3


async def test_a_tombstone_keeps_its_timestamp_once_its_horizon_is_set(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, [(b"a", b"1"), (b"a", None), (b"z", b"1")], timestamp=5_000)
    await compact(harness.store, log)
    tombstone = (await read_records(log))[0]
    assert (tombstone.offset, tombstone.timestamp) == (1, 5_001)
    data = (await read_bytes(log, 1)).data
    assert read_header(data).delete_horizon == NOW_MS + DAY_MS
    assert await log.offset_for_timestamp(5_001) == (1, 5_001)
    assert await log.offset_for_timestamp(0) == (1, 5_001)


async def test_a_second_pass_rewrites_nothing(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    spec = BatchSpec(producer_id=3, producer_epoch=0, base_sequence=0)
    await append(log, *keyed_batch([(b"p", b"1")], spec=spec))  # emptied, kept: its last
    await append_writes(log, [(b"k", b"1"), (b"k", None), (b"p", b"2"), (b"z", b"")])
    first = await compact(harness.store, log, request(producers=frozenset({0})))
    assert first is not None and first.new_segments > 0
    summaries = log.segment_summaries()
    again = await compact(harness.store, log, request(producers=frozenset({0})))
    assert again is not None and (again.new_segments, again.replaced_segments) == (0, 0)
    assert log.segment_summaries() == summaries


async def test_a_pass_is_due_only_past_the_dirty_ratio(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, [(b"k%d" % (index % 2), b"v") for index in range(6)])
    due = request(force=False, policy=CompactionPolicy(min_cleanable_ratio=0.5))
    result = await compact(harness.store, log, due)
    assert result is not None  # all dirty: the ratio is 1
    again = replace(due, first_dirty_offset=result.first_dirty_offset)
    assert await compact(harness.store, log, again) is None  # nothing dirty
    await append_writes(log, [(b"k0", b"w")])  # one dirty segment of 3 cleanable ones
    assert await compact(harness.store, log, again) is None
    lower = replace(again, policy=CompactionPolicy(min_cleanable_ratio=0.01))
    assert await compact(harness.store, log, lower) is not None


async def test_nothing_at_or_past_the_stable_offset_is_cleaned(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, [(b"k", b"%d" % index) for index in range(6)])
    result = await compact(harness.store, log, request(stable=3))
    assert result is not None and result.first_dirty_offset == 3
    assert [record.offset for record in await read_records(log)] == [2, 3, 4, 5]


async def test_a_compacted_log_reopens_as_it_was(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, [(b"k%d" % (index % 3), b"%d" % index) for index in range(12)])
    await compact(harness.store, log)
    await compact(harness.store, log, request(NOW_MS + 1))  # merges the cleaned segments
    before = await read_records(log)
    summaries = log.segment_summaries()
    log = await harness.reopen(ONE_BATCH_SEGMENTS)
    assert await read_records(log) == before
    assert log.segment_summaries()[: len(summaries) - 1] == summaries[:-1]
    assert await append_writes(log, [(b"new", b"1")]) == [12]


async def test_compressed_batches_keep_their_codec_and_records(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        batch, header = keyed_batch(
            [(b"x", b"old"), (b"c%d" % codec, b"kept"), (b"y", b"old")],
            spec=BatchSpec(attributes=codec),
        )
        await append(log, batch, header)
    await append_writes(log, [(b"x", b"new"), (b"y", b"new"), (b"end", b"")])
    before = {record.offset: record for record in await read_records(log)}
    await compact(harness.store, log)
    after = await read_records(log)
    assert [record.key for record in after] == [b"c1", b"c2", b"c3", b"c4", b"x", b"y", b"end"]
    assert all(record == before[record.offset] for record in after)
    data = await read_everything(log)
    codecs = [header.compression_codec for _, header in iter_batches(data) if header.records_count]
    assert codecs[:4] == [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]


async def test_headers_and_timestamps_survive_a_rewritten_batch(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    records = [
        Record(0, 7_000, b"gone", b"v", (("h", b"1"),)),
        Record(1, 7_005, b"kept", b"v", (("trace", b"abc"), ("empty", None))),
    ]
    batch = bytearray(build_batch(records))
    await append(log, batch)
    await append_writes(log, [(b"gone", b"new"), (b"end", b"")])
    await compact(harness.store, log)
    kept = (await read_records(log))[0]
    assert (kept.offset, kept.timestamp, kept.headers) == (
        1, 7_005, (("trace", b"abc"), ("empty", None)),
    )  # fmt: skip


async def test_a_producers_last_batch_stays_empty_to_keep_its_sequence(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    spec = BatchSpec(producer_id=7, producer_epoch=2, base_sequence=40)
    await append(log, *keyed_batch([(b"k", b"1"), (b"k", b"2")], spec=spec))
    await append_writes(log, [(b"k", b"3"), (b"z", b"1")])
    await compact(harness.store, log, request(producers=frozenset({1})))
    data = (await read_bytes(log, 0)).data
    first = read_header(data)
    assert (first.base_offset, first.last_offset_delta, first.records_count) == (0, 1, 0)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 2, 40)
    seen = []
    log = await harness.reopen(ONE_BATCH_SEGMENTS, on_batch=seen.append)
    assert [(header.producer_id, header.last_sequence) for header in seen] == [(7, 41)]


async def test_a_full_key_map_cleans_part_of_the_log_per_pass(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    writes = [(b"k%d" % (index % 4), b"%d" % index) for index in range(16)] + [(b"end", b"")]
    await append_writes(log, writes)
    first = await compact(harness.store, log, request(capacity=2))
    assert first is not None and first.first_dirty_offset == 2  # k0, k1 mapped; k2 is new
    second = await compact(harness.store, log, request(capacity=2, first_dirty=2))
    assert second is not None and second.first_dirty_offset == 4
    passes = 2
    dirty = second.first_dirty_offset
    while dirty < 16:
        result = await compact(harness.store, log, request(capacity=2, first_dirty=dirty))
        assert result is not None
        dirty = result.first_dirty_offset
        passes += 1
    latest = latest_by_key(await read_records(log))
    assert {key: record.value for key, record in latest.items()} == {
        b"k0": b"12", b"k1": b"13", b"k2": b"14", b"k3": b"15", b"end": b"",
    }  # fmt: skip
    assert len(await read_records(log)) == 5


async def test_offsets_by_timestamp_skip_removed_records(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append_writes(log, [(b"k", b"old"), (b"j", b"1"), (b"k", b"new"), (b"z", b"")])
    await compact(harness.store, log)
    assert await log.offset_for_timestamp(1_000) == (1, 1_001)
    assert await log.offset_of_max_timestamp() == (3, 1_003)
