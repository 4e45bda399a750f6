"""Power loss under concurrent produce load: every acknowledged batch survives.

A SimulatedFileSystem stands in for the disk. Several writers append batches
concurrently, to one partition or interleaved over 100 partitions of one store
(which share its write-ahead log, its spills and its checkpoints), and record a
batch as acknowledged only once ``wait_durable`` returns. At a random moment the
power is cut (unsynced bytes are lost or torn), the store is recovered from what
survived, and the test checks, partition by partition, that every acknowledged
batch is there exactly once at its offset, that offsets are dense, and that the
recovered logs accept new writes. Small store settings make spills, checkpoints
and write-ahead log files come often, so cuts land in the middle of each.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

from kshim.protocol.record_batch import RECORDS_OFFSET, iter_batches, validate_produced
from kshim.protocol.records import Record, build_batch, decode_records, iter_records
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import (
    LogConfig,
    PartitionLog,
    PartitionToOpen,
    StoreSettings,
    TopicPartition,
    chunk_bytes,
)
from kshim.storage.log.log_store import DiskLogStore

DATA_DIR = "/data"
TRIALS = 30
CRASHES = 3  # each trial cuts the power this many times, recovering in between
WRITERS = 4

# What the store must keep, by partition: base offset -> the batch's records part.
Acknowledged = dict[TopicPartition, dict[int, bytes]]


@dataclass(frozen=True)
class Trial:
    partitions: list[TopicPartition]
    config: LogConfig
    settings: StoreSettings


def _batch(writer: int, sequence: int, count: int, run: int = 0) -> bytearray:
    value = f"{run}:{writer}:{sequence}"
    records = [
        Record(index, 1_000 + sequence, f"k{writer}".encode(), f"{value}:{index}".encode())
        for index in range(count)
    ]
    return bytearray(build_batch(records))


def _trial(rng: random.Random, partition_count: int) -> Trial:
    config = LogConfig(
        segment_bytes=rng.choice([300, 2_000, 1 << 20]), memtable_bytes=rng.choice([0, 4096])
    )
    settings = StoreSettings(
        memtable_total_bytes=rng.choice([2_000, 64 << 10, 32 << 20]),
        wal_segment_bytes=rng.choice([1_000, 16 << 10, 64 << 20]),
        checkpoint_bytes=rng.choice([3_000, 64 << 10, 32 << 20]),
        checkpoint_interval_ms=rng.choice([1, 5_000]),
        max_open_files=rng.choice([8, 128]),
        inline_write_max_us=rng.choice([0, 5_000]),  # rounds in a worker thread, or inline
    )
    partitions = [TopicPartition(f"t{index % 7}", index) for index in range(partition_count)]
    return Trial(partitions, config, settings)


async def _recover(
    filesystem: SimulatedFileSystem, trial: Trial
) -> tuple[DiskLogStore, list[PartitionLog]]:
    store = DiskLogStore(DATA_DIR, lambda: 0, filesystem, trial.settings)
    specs = [PartitionToOpen(partition, trial.config, 0) for partition in trial.partitions]
    return store, list(await store.recover(specs))


async def _writer(
    logs: list[PartitionLog],
    writer: int,
    acknowledged: Acknowledged,
    rng: random.Random,
    run: int,
) -> None:
    for sequence in range(10_000):
        log = rng.choice(logs)
        batch = _batch(writer, sequence, rng.randint(1, 5), run)
        base_offset = log.append(batch, validate_produced(batch))
        await log.wait_durable(base_offset)
        acknowledged[log.topic_partition][base_offset] = bytes(batch[RECORDS_OFFSET:])
        if rng.random() < 0.3:
            await asyncio.sleep(0)


async def _run_until_power_cut(
    rng: random.Random, filesystem: SimulatedFileSystem, trial: Trial, run: int
) -> tuple[SimulatedFileSystem, Acknowledged]:
    store, logs = await _recover(filesystem, trial)
    acknowledged: Acknowledged = {partition: {} for partition in trial.partitions}
    writers = [
        asyncio.create_task(_writer(logs, writer, acknowledged, rng, run))
        for writer in range(WRITERS)
    ]
    for _ in range(rng.randint(1, 400)):
        await asyncio.sleep(0)
    snapshot = {partition: dict(batches) for partition, batches in acknowledged.items()}
    survivor = filesystem.after_power_loss(rng)  # acknowledged before the cut
    for task in writers:
        task.cancel()
    await asyncio.gather(*writers, return_exceptions=True)
    await store.close()  # writes to the old filesystem only: the survivor is a copy
    return survivor, snapshot


async def _read_all(log: PartitionLog) -> bytes:
    chunks: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        result = await log.read(offset, 1 << 20)
        chunks.extend(chunk_bytes(chunk) for chunk in result.chunks)
        offset = result.end_offset
    return b"".join(chunks)


@pytest.mark.parametrize("partition_count", [1, 100])
@pytest.mark.parametrize("seed", range(TRIALS))
async def test_acknowledged_batches_survive_power_loss(seed: int, partition_count: int) -> None:
    rng = random.Random(seed)
    trial = _trial(rng, partition_count)
    filesystem = SimulatedFileSystem()
    acknowledged: Acknowledged = {partition: {} for partition in trial.partitions}
    for run in range(CRASHES):
        filesystem, acknowledged_now = await _run_until_power_cut(rng, filesystem, trial, run)
        for partition, batches in acknowledged_now.items():
            acknowledged[partition].update(batches)
        await _check_recovered(filesystem, trial, acknowledged)


async def _check_recovered(
    filesystem: SimulatedFileSystem, trial: Trial, acknowledged: Acknowledged
) -> None:
    store, logs = await _recover(filesystem, trial)
    for log in logs:
        await _check_partition(log, acknowledged[log.topic_partition])
    await store.close()


async def _check_partition(log: PartitionLog, acknowledged: dict[int, bytes]) -> None:
    stored = await _read_all(log)
    by_offset = {}
    expected_next = 0
    for position, header in iter_batches(stored):
        assert header.base_offset == expected_next, "offsets must stay dense"
        by_offset[header.base_offset] = stored[position + RECORDS_OFFSET : position + header.size]
        expected_next = header.next_offset
    assert expected_next == log.high_watermark == log.log_end_offset
    for offset, records in acknowledged.items():
        assert by_offset.get(offset) == records, f"{log.topic_partition}: batch at {offset} lost"
    values = [record.value for record in iter_records(stored)]
    assert len(values) == len(set(values)), f"{log.topic_partition}: a batch was stored twice"

    batch = _batch(99, len(acknowledged), 3, run=-1)
    new_offset = log.append(batch, validate_produced(batch))
    await log.wait_durable(new_offset)
    assert new_offset == expected_next
    read = await log.read(new_offset, 1 << 20)
    _, new_records = decode_records(chunk_bytes(read.chunks[0]))
    assert [record.offset for record in new_records] == [new_offset, new_offset + 1, new_offset + 2]
    acknowledged[new_offset] = bytes(batch[RECORDS_OFFSET:])
