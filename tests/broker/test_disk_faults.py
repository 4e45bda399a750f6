"""Disk faults seen through a Broker (its logs on a FaultyFileSystem around a
SimulatedFileSystem, its LMDB metadata in tmp_path): what a producer is answered when an
fsync fails, and what a slow disk does to group commit and the ``fsync_p99`` alarm.

A slow disk makes every fsync take ``SLOW_FSYNC_S``; producers keep appending at the same
pace (an open loop, as many clients with linger and in-flight requests do), so each
group-commit round covers what arrived while the previous one synced and batches per
fsync grow with the fsync's time (kshim/storage/log/group_commit.py; LSMQ's group-committed
write-ahead log, docs/references.md). A closed loop, each producer waiting for its
acknowledgement before its next append, would show no widening: every round would cover
every producer whatever the disk. The pace is real time because the slowness is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.api.records import produce
from kshim.broker.alarms.checks import FSYNC_P99, MIN_ROUNDS, AlarmSettings, CheckState, check_once
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.jobs.broker_jobs import watched
from kshim.protocol.errors import ErrorCode
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.records import Record, build_batch
from kshim.storage.files.faulty_filesystem import SYNC, FaultyFileSystem
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import PartitionLog, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from tests.broker.handler_calls import NOW_MS, context, decoded, fixed_clock
from tests.storage.support import producer_batch, read_everything, values_of

TOPIC = "orders"
PARTITIONS = 8
PRODUCE_VERSION = 9
WAIT_S = 10.0
KAFKA_STORAGE_ERROR = 56  # the Kafka protocol's error code, as clients see it
SLOW_FSYNC_S = 0.2
ALARM_MS = 100  # kshim.alarm.fsync.p99.ms: between a fast fsync and a slow one
TICK_S = 0.005  # producers' pace: one batch per partition per tick
MAX_TICKS = 2_000  # a bound on each phase (10 s), never reached when rounds go on
NO_ALARMS = AlarmSettings(
    interval_s=1, group_lag_records=0, group_lag_s=0, view_lag_records=0, view_lag_s=0,
    disk_free_bytes=0, fsync_p99_s=0,
)  # fmt: skip


@pytest.fixture
def faulty() -> FaultyFileSystem:
    return FaultyFileSystem(SimulatedFileSystem())


@pytest.fixture
async def broker(tmp_path: Path, faulty: FaultyFileSystem) -> AsyncIterator[Broker]:
    settings = {
        "log.dirs": str(tmp_path),
        "kshim.full.view.process": "false",
        "kshim.alarm.fsync.p99.ms": str(ALARM_MS),
    }
    opened = Broker(BrokerConfig.load([settings]), clock=fixed_clock, filesystem=faulty)
    await opened.start()
    try:
        await opened.topics.create(TOPIC, PARTITIONS, {})
        yield opened
    finally:
        await opened.close()


async def _produce(broker: Broker, value: bytes) -> Any:
    """One Produce request (acks=-1) of one record to partition 0; its partition's answer."""
    batch = memoryview(build_batch([Record(0, NOW_MS, b"k", value)]))
    topic_data = (TopicData(TOPIC, (PartitionData(0, batch),)),)
    request = ProduceRequest(None, -1, 5000, topic_data)
    handling = produce.handle(request, context(broker, 0, PRODUCE_VERSION))
    answer = await asyncio.wait_for(handling, WAIT_S)
    [topic] = decoded(0, PRODUCE_VERSION, answer).responses
    [result] = topic.partition_responses
    return result


def _logs(broker: Broker) -> list[PartitionLog]:
    logs = [broker.topics.log(TopicPartition(TOPIC, index)) for index in range(PARTITIONS)]
    assert all(log is not None for log in logs)
    return [log for log in logs if log is not None]


async def test_a_produce_during_a_failed_fsync_is_answered_kafka_storage_error(
    broker: Broker, faulty: FaultyFileSystem, caplog: pytest.LogCaptureFixture
) -> None:
    first = await _produce(broker, b"acknowledged")
    assert first.error_code == ErrorCode.none
    faulty.fail_syncs(errno.EIO)
    with caplog.at_level(logging.ERROR, "kshim.storage.log.log_store"):
        failed = await _produce(broker, b"failed")
        later = await _produce(broker, b"later")
    assert (failed.error_code, later.error_code) == (KAFKA_STORAGE_ERROR, KAFKA_STORAGE_ERROR)
    assert faulty.injected[SYNC] == 1
    error = await asyncio.wait_for(broker.logs.write_failed(), WAIT_S)
    assert isinstance(error, OSError) and error.errno == errno.EIO
    assert caplog.messages == [
        "log store: write failed, refusing appends until restarted: [Errno 5] Input/output error"
    ]
    [log, *_] = _logs(broker)
    assert [value for _, value in values_of(await read_everything(log))] == [b"acknowledged"]


async def _open_loop(logs: list[PartitionLog], rounds: list[int], until_rounds: int) -> int:
    """Appends a batch to each log every tick, not waiting for acknowledgements, until
    ``until_rounds`` group-commit rounds have ended; returns how many batches, once
    every one of them is acknowledged."""
    waits = []
    for _ in range(MAX_TICKS):
        if len(rounds) >= until_rounds:
            break
        for log in logs:
            base_offset = log.append(*producer_batch(1, timestamp=NOW_MS))
            waits.append(log.wait_durable(base_offset))
        await asyncio.sleep(TICK_S)
    await asyncio.wait_for(asyncio.gather(*waits), WAIT_S)  # raises if one failed
    return len(waits)


async def _phase(broker: Broker, fsync_delay_s: float, faulty: FaultyFileSystem) -> float:
    """Producers at the same pace over a disk whose fsyncs take ``fsync_delay_s``, for
    enough rounds to judge the alarm; returns the batches per round (per fsync)."""
    faulty.fsync_delay_s = fsync_delay_s
    rounds: list[int] = []
    broker.flush_rounds.take()  # the alarm judges this phase's rounds only

    def observe(seconds: float, batches: int) -> None:
        rounds.append(batches)

    store = broker.logs
    assert isinstance(store, DiskLogStore)
    store.observe_rounds(observe)
    try:
        appended = await _open_loop(_logs(broker), rounds, MIN_ROUNDS + 2)
    finally:
        store.unobserve_rounds(observe)
    assert sum(rounds) == appended  # every batch in exactly one round, and acknowledged
    settings = AlarmSettings.of(broker.config)
    only_fsync = dataclasses.replace(NO_ALARMS, fsync_p99_s=settings.fsync_p99_s)
    await check_once(watched(broker), only_fsync, CheckState())
    return appended / len(rounds)


async def test_a_slow_disk_widens_group_commit_and_raises_the_fsync_alarm(
    broker: Broker, faulty: FaultyFileSystem, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "kshim.broker.alarms.registry"):
        fast = await _phase(broker, 0.0, faulty)
        assert (FSYNC_P99, "log") not in broker.alarms.active
        slow = await _phase(broker, SLOW_FSYNC_S, faulty)
    faulty.fsync_delay_s = 0.0  # the broker's closing checkpoint need not wait
    alarm = broker.alarms.active[(FSYNC_P99, "log")]
    assert alarm.value >= SLOW_FSYNC_S
    assert slow >= 5 * fast, (slow, fast)  # one tick's batches per round on a fast disk
    assert [message for message in caplog.messages if "kind=fsync_p99" in message]
    for log in _logs(broker):
        assert log.high_watermark == log.log_end_offset
