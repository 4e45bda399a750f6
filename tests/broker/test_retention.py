"""Retention and DeleteRecords applied to real segment files through the broker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.retention import advance_log_start, enforce_retention_once
from kshim.protocol.record_batch import validate_produced
from kshim.protocol.records import Record, build_batch
from kshim.storage.interface import OffsetOutOfRange, PartitionLog, TopicPartition, chunk_bytes
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.testing import FakeClock

TOPIC_PARTITION = TopicPartition("t", 0)
# Plain retention: no full-data view holds segments back (tests/full_view covers that).
NO_VIEW = {"kshim.full.view": "false"}


async def _broker(data_dir: Path, clock: FakeClock) -> Broker:
    broker = Broker(BrokerConfig.load([{"log.dirs": str(data_dir)}]), clock=clock)
    await broker.start()
    return broker


def _log(broker: Broker) -> PartitionLog:
    partition = broker.resolver.deletable_partition(TOPIC_PARTITION)
    assert partition is not None
    return partition.log


async def _append(broker: Broker, timestamp: int, count: int = 1) -> int:
    log = _log(broker)
    batch = bytearray(build_batch([Record(i, timestamp, b"k", b"v" * 50) for i in range(count)]))
    offset = log.append(batch, validate_produced(batch))
    await log.wait_durable(offset)
    return offset


async def _segment_files(broker: Broker) -> list[str]:
    """The partition's segment files, once everything appended is spilled to them."""
    assert isinstance(broker.logs, DiskLogStore)
    await broker.logs.checkpoint()
    directory = broker.logs.directory_of(TOPIC_PARTITION)
    return sorted(name for name in os.listdir(directory) if name.endswith(".log"))


async def test_time_retention_drops_old_segments_and_survives_restart(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    broker = await _broker(tmp_path, clock)
    await broker.topics.create("t", 1, {**NO_VIEW, "segment.bytes": "200", "retention.ms": "10000"})
    for index in range(6):  # each ~130-byte batch fills a 200-byte segment: one per segment
        await _append(broker, timestamp=1_000_000 + index * 1000)
    assert len(await _segment_files(broker)) == 6

    clock.now_ms = 1_000_000 + 12_500  # batches stamped before 1_002_500 have expired
    assert await enforce_retention_once(broker) == 3
    log = _log(broker)
    assert log.log_start_offset == 3
    assert (await _segment_files(broker))[0] == f"{3:020d}.log"
    await broker.close()

    broker = await _broker(tmp_path, clock)
    log = _log(broker)
    assert (log.log_start_offset, log.high_watermark) == (3, 6)
    offset = 3
    while offset < log.high_watermark:  # a read stays within one segment
        result = await log.read(offset, 1 << 20)
        for chunk in result.chunks:
            chunk_bytes(chunk)
        offset = result.end_offset
    assert offset == 6
    await broker.close()


async def test_retention_forgets_aborted_transactions_below_the_new_log_start(
    tmp_path: Path,
) -> None:
    clock = FakeClock(1_000_000)
    broker = await _broker(tmp_path, clock)
    await broker.topics.create("t", 1, {**NO_VIEW, "segment.bytes": "200", "retention.ms": "10000"})
    for index in range(6):  # one batch per segment, as above
        await _append(broker, timestamp=1_000_000 + index * 1000)
    gone, kept = AbortedTransaction(7, 0, 1), AbortedTransaction(7, 2, 4)  # (pid, first, marker)
    for entry in (gone, kept):
        broker.metadata.transactions.add_aborted(TOPIC_PARTITION, entry)
        broker.transactions.partition(TOPIC_PARTITION).record_abort(entry)
    clock.now_ms = 1_000_000 + 12_500
    assert await enforce_retention_once(broker) == 3  # log start 3: the marker at 1 is gone
    assert broker.transactions.partition(TOPIC_PARTITION).aborted == [kept]
    await broker.close()

    broker = await _broker(tmp_path, clock)
    assert broker.transactions.partition(TOPIC_PARTITION).aborted == [kept]
    await broker.close()


async def test_size_retention_keeps_the_newest_bytes(tmp_path: Path) -> None:
    clock = FakeClock(5_000)
    broker = await _broker(tmp_path, clock)
    await broker.topics.create(
        "t", 1, {**NO_VIEW, "segment.bytes": "200", "retention.bytes": "300"}
    )
    for _ in range(5):
        await _append(broker, timestamp=5_000)
    dropped = await enforce_retention_once(broker)
    log = _log(broker)
    remaining = sum(summary.size for summary in log.segment_summaries())
    assert dropped == 2  # five ~121-byte segments: dropping a third would leave < 300 bytes
    assert 300 <= remaining < 300 + 200
    assert log.log_start_offset == 2
    await broker.close()


async def test_delete_records_lets_retention_drop_whole_segments(tmp_path: Path) -> None:
    clock = FakeClock(5_000)
    broker = await _broker(tmp_path, clock)
    await broker.topics.create("t", 1, {**NO_VIEW, "segment.bytes": "200"})
    for _ in range(4):
        await _append(broker, timestamp=5_000)
    log = _log(broker)
    await advance_log_start(broker, log, 2)  # as DeleteRecords does
    assert log.log_start_offset == 2
    assert len(await _segment_files(broker)) == 4  # whole segments are left to retention
    assert await enforce_retention_once(broker) == 2
    assert (await _segment_files(broker)) == [f"{2:020d}.log", f"{3:020d}.log"]
    assert log.log_start_offset == 2


async def test_compacted_topics_are_not_deleted_by_time(tmp_path: Path) -> None:
    clock = FakeClock(10**9)
    broker = await _broker(tmp_path, clock)
    await broker.topics.create("t", 1, {**NO_VIEW, "segment.bytes": "200", "retention.ms": "1",
                                        "cleanup.policy": "compact"})  # fmt: skip
    for _ in range(3):
        await _append(broker, timestamp=1)
    assert await enforce_retention_once(broker) == 0
    assert len(await _segment_files(broker)) == 3
    await broker.close()


async def test_the_new_log_start_is_durable_before_any_segment_file_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash while retention deletes files must not bring deleted offsets back: LMDB
    already holds the new log start when the first file is deleted."""
    clock = FakeClock(1_000_000)
    broker = await _broker(tmp_path, clock)
    await broker.topics.create("t", 1, {**NO_VIEW, "segment.bytes": "200", "retention.ms": "10000"})
    for index in range(4):  # one batch per segment
        await _append(broker, timestamp=1_000_000 + index * 1000)
    log = _log(broker)
    durable_at_drop: list[int] = []

    async def crash(count: int, log_start_offset: int) -> None:
        durable_at_drop.append(broker.metadata.log_start_offset(TOPIC_PARTITION))
        raise OSError("crash while deleting segment files")

    monkeypatch.setattr(log, "drop_oldest_segments", crash)
    clock.now_ms = 1_000_000 + 12_500  # the first three batches have expired
    with pytest.raises(OSError, match="crash"):
        await enforce_retention_once(broker)
    assert durable_at_drop == [3]
    await broker.close()


async def test_delete_records_makes_the_log_start_durable_before_readers_see_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = await _broker(tmp_path, FakeClock(5_000))
    await broker.topics.create("t", 1, NO_VIEW)
    for _ in range(3):
        await _append(broker, timestamp=5_000)
    log = _log(broker)
    durable_at_advance: list[int] = []
    advance = log.advance_log_start_offset

    def recording_advance(offset: int) -> None:
        durable_at_advance.append(broker.metadata.log_start_offset(TOPIC_PARTITION))
        advance(offset)

    monkeypatch.setattr(log, "advance_log_start_offset", recording_advance)
    await advance_log_start(broker, log, 2)
    assert (durable_at_advance, log.log_start_offset) == ([2], 2)
    await advance_log_start(broker, log, 1)  # never backwards, and nothing written
    assert (durable_at_advance, log.log_start_offset) == ([2], 2)
    with pytest.raises(OffsetOutOfRange):
        await advance_log_start(broker, log, 4)  # past the high watermark
    assert broker.metadata.log_start_offset(TOPIC_PARTITION) == 2
    await broker.close()
