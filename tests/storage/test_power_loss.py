"""Power loss under concurrent produce load: every acknowledged batch survives.

A SimulatedFileSystem stands in for the disk. Several writers append batches
concurrently and record a batch as acknowledged only once ``wait_durable``
returns. At a random moment the power is cut (unsynced bytes are lost or
torn), the log is recovered from what survived, and the test checks that
every acknowledged batch is there exactly once at its offset, that offsets
are dense, and that the recovered log accepts new writes.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from kshim.protocol.record_batch import iter_batches, validate_produced
from kshim.protocol.records import Record, build_batch, decode_records, iter_records
from kshim.storage.interface import LogConfig, TopicPartition, chunk_bytes
from kshim.storage.partition_log import DiskPartitionLog
from kshim.storage.simulated_filesystem import SimulatedFileSystem

DIRECTORY = "/data/logs/t-0"
TOPIC_PARTITION = TopicPartition("t", 0)
TRIALS = 40
CRASHES = 3  # each trial cuts the power this many times, recovering in between
WRITERS = 4


def _batch(writer: int, sequence: int, count: int, run: int = 0) -> bytearray:
    value = f"{run}:{writer}:{sequence}"
    records = [
        Record(index, 1_000 + sequence, f"k{writer}".encode(), f"{value}:{index}".encode())
        for index in range(count)
    ]
    return bytearray(build_batch(records))


async def _open(filesystem: SimulatedFileSystem, config: LogConfig) -> DiskPartitionLog:
    return await DiskPartitionLog.open(TOPIC_PARTITION, DIRECTORY, config, filesystem, lambda: 0, 0)


async def _writer(
    log: DiskPartitionLog, writer: int, acknowledged: dict[int, bytes], rng: random.Random, run: int
) -> None:
    for sequence in range(10_000):
        batch = _batch(writer, sequence, rng.randint(1, 5), run)
        base_offset = log.append(batch, validate_produced(batch))
        await log.wait_durable(base_offset)
        acknowledged[base_offset] = bytes(batch[61:])  # the records part, offsets excluded
        if rng.random() < 0.3:
            await asyncio.sleep(0)


async def _run_until_power_cut(
    rng: random.Random, filesystem: SimulatedFileSystem, config: LogConfig, run: int
) -> tuple[SimulatedFileSystem, dict[int, bytes]]:
    log = await _open(filesystem, config)
    acknowledged: dict[int, bytes] = {}
    writers = [
        asyncio.create_task(_writer(log, writer, acknowledged, rng, run))
        for writer in range(WRITERS)
    ]
    for _ in range(rng.randint(1, 400)):
        await asyncio.sleep(0)
    snapshot = dict(acknowledged)  # acknowledged before the cut
    survivor = filesystem.after_power_loss(rng)
    for task in writers:
        task.cancel()
    await asyncio.gather(*writers, return_exceptions=True)
    return survivor, snapshot


async def _read_all(log: DiskPartitionLog) -> bytes:
    chunks: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        result = await log.read(offset, 1 << 20)
        chunks.extend(chunk_bytes(chunk) for chunk in result.chunks)
        offset = result.end_offset
    return b"".join(chunks)


@pytest.mark.parametrize("seed", range(TRIALS))
async def test_acknowledged_batches_survive_power_loss(seed: int) -> None:
    rng = random.Random(seed)
    config = LogConfig(
        segment_bytes=rng.choice([300, 2_000, 1 << 20]), memtable_bytes=rng.choice([0, 4096])
    )
    filesystem = SimulatedFileSystem()
    acknowledged: dict[int, bytes] = {}
    for run in range(CRASHES):
        filesystem, acknowledged_now = await _run_until_power_cut(rng, filesystem, config, run)
        acknowledged.update(acknowledged_now)
        await _check_recovered(filesystem, config, acknowledged)


async def _check_recovered(
    filesystem: SimulatedFileSystem, config: LogConfig, acknowledged: dict[int, bytes]
) -> None:
    log = await _open(filesystem, config)
    stored = await _read_all(log)

    by_offset = {}
    expected_next = 0
    for position, header in iter_batches(stored):
        assert header.base_offset == expected_next, "offsets must stay dense"
        by_offset[header.base_offset] = stored[position + 61 : position + header.size]
        expected_next = header.next_offset
    assert expected_next == log.high_watermark == log.log_end_offset
    for offset, records in acknowledged.items():
        assert by_offset.get(offset) == records, f"acknowledged batch at {offset} lost"
    values = [record.value for record in iter_records(stored)]
    assert len(values) == len(set(values)), "a batch was stored twice"

    batch = _batch(99, len(acknowledged), 3, run=-1)
    new_offset = log.append(batch, validate_produced(batch))
    await log.wait_durable(new_offset)
    assert new_offset == expected_next
    read = await log.read(new_offset, 1 << 20)
    _, new_records = decode_records(chunk_bytes(read.chunks[0]))
    assert [record.offset for record in new_records] == [new_offset, new_offset + 1, new_offset + 2]
    acknowledged[new_offset] = bytes(batch[61:])
    await log.close()
