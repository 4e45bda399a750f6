"""Failed writes and fsyncs of the log store, injected (kshim/storage/files/faulty_filesystem.py).

A FaultyFileSystem around a SimulatedFileSystem makes every write or every fsync fail from
a chosen moment (``EIO``, ``ENOSPC``), in a flush round, a checkpoint, or the checkpoint a
restart starts. Each test checks what docs/disk-faults.md promises: nothing of the failed
round is acknowledged, the store reports the error once (``write_failed``) and refuses
every later append without ever syncing again (a failed fsync is never retried, not even
once the disk works again: PostgreSQL's fsync errors, docs/references.md), everything
acknowledged before stays readable, and after a power cut recovery keeps every
acknowledged batch, with at most a prefix of the failed round after them. Once failed,
the store syncs nothing more: not for a deletion, a checkpoint a timer set before, nor a
round that was syncing in a worker thread when a checkpoint failed (that round
acknowledges nothing).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import random
import threading
from collections.abc import Collection, Sequence

import pytest

from kshim.protocol.record_batch import RECORDS_OFFSET, iter_batches
from kshim.storage.files.faulty_filesystem import SYNC, WRITE, FaultyFileSystem
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import (
    LogConfig,
    LogFailed,
    PartitionLog,
    PartitionToOpen,
    StoreSettings,
    TopicPartition,
)
from kshim.storage.log.log_store import DiskLogStore
from tests.storage.support import producer_batch, read_everything

DATA_DIR = "/data"
WAIT_S = 10.0
RECORDS_PER_BATCH = 3
ACKNOWLEDGED_ROUNDS = 4
# No checkpoint of its own accord: each test says when one runs.
QUIET = StoreSettings(checkpoint_bytes=1 << 40, checkpoint_interval_ms=3_600_000)
FAULTS = [
    pytest.param(SYNC, errno.EIO, id="fsync-EIO"),
    pytest.param(WRITE, errno.EIO, id="write-EIO"),
    pytest.param(WRITE, errno.ENOSPC, id="write-ENOSPC"),
]

# What each partition holds, in offset order: (base offset, the batch's records part).
Batches = dict[TopicPartition, list[tuple[int, bytes]]]


def _inject(filesystem: FaultyFileSystem, kind: str, error_number: int) -> None:
    if kind == SYNC:
        filesystem.fail_syncs(error_number)
    else:
        filesystem.fail_writes(error_number)


def _partitions(count: int) -> list[TopicPartition]:
    return [TopicPartition("orders", index) for index in range(count)]


async def _open(
    filesystem: FaultyFileSystem | SimulatedFileSystem,
    partitions: Sequence[TopicPartition],
    settings: StoreSettings = QUIET,
) -> tuple[DiskLogStore, list[PartitionLog]]:
    store = DiskLogStore(DATA_DIR, lambda: 0, filesystem, settings)
    specs = [PartitionToOpen(partition, LogConfig(), 0) for partition in partitions]
    return store, list(await store.recover(specs))


def _append_round(logs: Sequence[PartitionLog], label: str) -> Batches:
    """One batch appended to each log (not waited for)."""
    appended: Batches = {}
    for log in logs:
        batch, header = producer_batch(RECORDS_PER_BATCH, label=f"{label}-{log.topic_partition}")
        base_offset = log.append(batch, header)
        appended[log.topic_partition] = [(base_offset, bytes(batch[RECORDS_OFFSET:]))]
    return appended


async def _outcomes(logs: Sequence[PartitionLog], appended: Batches) -> list[BaseException | None]:
    """What ``wait_durable`` gave each appended batch: None when acknowledged."""
    waits = [
        log.wait_durable(base + RECORDS_PER_BATCH - 1)
        for log in logs
        for base, _ in appended[log.topic_partition]
    ]
    return await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), WAIT_S)


async def _acknowledged_rounds(logs: Sequence[PartitionLog], rounds: int) -> Batches:
    acknowledged: Batches = {log.topic_partition: [] for log in logs}
    for number in range(rounds):
        appended = _append_round(logs, f"acknowledged-{number}")
        assert await _outcomes(logs, appended) == [None] * len(logs)
        for partition, batches in appended.items():
            acknowledged[partition] += batches
    return acknowledged


async def _stored(log: PartitionLog) -> list[tuple[int, bytes]]:
    data = await read_everything(log)
    return [
        (header.base_offset, data[position + RECORDS_OFFSET : position + header.size])
        for position, header in iter_batches(data)
    ]


async def _assert_failed_and_refusing(
    store: DiskLogStore, filesystem: FaultyFileSystem, logs: Sequence[PartitionLog],
    error_number: int,
) -> None:  # fmt: skip
    """The store reports the error and refuses appends, even once the disk works again,
    without a single sync more."""
    error = await asyncio.wait_for(store.write_failed(), WAIT_S)
    assert isinstance(error, OSError) and error.errno == error_number
    attempts = filesystem.sync_attempts
    filesystem.heal()
    for log in logs:
        with pytest.raises(LogFailed):
            log.append(*producer_batch(1, label="refused"))
    await store.close()
    assert filesystem.sync_attempts == attempts, "a sync was attempted after the failure"


async def _assert_recovered(
    filesystem: SimulatedFileSystem, acknowledged: Batches, unacknowledged: Batches, seed: int
) -> None:
    """After a power cut (a random part of every unsynced tail torn off), recovery keeps
    every acknowledged batch and, after them only, a prefix of the unacknowledged ones."""
    survivor = filesystem.after_power_loss(random.Random(seed))
    store, logs = await _open(survivor, list(acknowledged))
    for log in logs:
        stored = await _stored(log)
        kept = acknowledged[log.topic_partition]
        assert stored[: len(kept)] == kept, f"{log.topic_partition}: acknowledged batch lost"
        tail = stored[len(kept) :]
        assert tail == unacknowledged.get(log.topic_partition, [])[: len(tail)]
        assert log.high_watermark == log.log_end_offset
    await store.close()


# -- a flush round fails ---------------------------------------------------------------------


@pytest.mark.parametrize("inline_write_max_us", [0, 5_000], ids=["thread", "inline"])
@pytest.mark.parametrize("partition_count", [1, 3], ids=["segment-round", "wal-round"])
@pytest.mark.parametrize(("kind", "error_number"), FAULTS)
async def test_a_failed_flush_round_acknowledges_nothing_and_is_never_retried(
    kind: str, error_number: int, partition_count: int, inline_write_max_us: int
) -> None:
    """One partition: rounds write its segment files; several: the write-ahead log."""
    simulated = SimulatedFileSystem()
    faulty = FaultyFileSystem(simulated)
    settings = StoreSettings(
        checkpoint_bytes=QUIET.checkpoint_bytes,
        checkpoint_interval_ms=QUIET.checkpoint_interval_ms,
        inline_write_max_us=inline_write_max_us,
    )
    store, logs = await _open(faulty, _partitions(partition_count), settings)
    acknowledged = await _acknowledged_rounds(logs, ACKNOWLEDGED_ROUNDS)

    _inject(faulty, kind, error_number)
    failed_round = _append_round(logs, "failed")
    outcomes = await _outcomes(logs, failed_round)
    assert all(isinstance(outcome, LogFailed) for outcome in outcomes), outcomes
    assert faulty.injected[kind] == 1, "the failed write or fsync was tried again"
    for log in logs:  # nothing of the failed round is visible; the rest still is
        assert await _stored(log) == acknowledged[log.topic_partition]
    await _assert_failed_and_refusing(store, faulty, logs, error_number)
    await _assert_recovered(simulated, acknowledged, failed_round, seed=error_number)


# -- a checkpoint fails ------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "error_number"), FAULTS)
async def test_a_failed_checkpoint_fails_the_store(kind: str, error_number: int) -> None:
    """``checkpoint`` (a tool's, or the one ``close`` runs) spills batches only the
    write-ahead log holds and syncs the segment files: its failure fails the store too,
    or a later checkpoint would sync those files again and let the log go."""
    simulated = SimulatedFileSystem()
    faulty = FaultyFileSystem(simulated)
    store, logs = await _open(faulty, _partitions(3))
    acknowledged = await _acknowledged_rounds(logs, ACKNOWLEDGED_ROUNDS)

    _inject(faulty, kind, error_number)
    with pytest.raises(OSError) as raised:
        await store.checkpoint()
    assert raised.value.errno == error_number
    assert store.failure is raised.value
    for log in logs:
        assert await _stored(log) == acknowledged[log.topic_partition]
    await _assert_failed_and_refusing(store, faulty, logs, error_number)
    await _assert_recovered(simulated, acknowledged, {}, seed=error_number)


@pytest.mark.parametrize(("kind", "error_number"), FAULTS)
async def test_a_failed_background_checkpoint_after_a_restart_fails_the_store(
    kind: str, error_number: int
) -> None:
    """The checkpoint a restart starts in the background (to sync what recovery replayed
    from the write-ahead log into segment files) fails: the store fails, and the
    write-ahead log still holds everything for the next recovery."""
    first = SimulatedFileSystem()
    store, logs = await _open(first, _partitions(3))
    acknowledged = await _acknowledged_rounds(logs, ACKNOWLEDGED_ROUNDS)
    simulated = first.after_power_loss()
    await store.close()  # of the first filesystem; the survivor is a copy

    faulty = FaultyFileSystem(simulated)
    store, logs = await _open(faulty, list(acknowledged))
    _inject(faulty, kind, error_number)  # before the checkpoint ``recover`` started runs
    error = await asyncio.wait_for(store.write_failed(), WAIT_S)
    assert faulty.injected[kind] >= 1
    assert isinstance(error, OSError) and error.errno == error_number
    for log in logs:
        assert await _stored(log) == acknowledged[log.topic_partition]
    await _assert_failed_and_refusing(store, faulty, logs, error_number)
    await _assert_recovered(simulated, acknowledged, {}, seed=error_number)


# -- after the failure --------------------------------------------------------------------------


async def test_after_a_failure_neither_a_deletion_nor_a_checkpoint_syncs() -> None:
    """A deletion's record and a checkpoint would make the write-ahead log and the segment
    files sync again: once the store failed, neither does (a sync that succeeds after a
    failed one proves nothing about what the failed one lost)."""
    faulty = FaultyFileSystem(SimulatedFileSystem())
    store, logs = await _open(faulty, _partitions(3))
    await _acknowledged_rounds(logs, ACKNOWLEDGED_ROUNDS)
    faulty.fail_syncs(errno.EIO)
    await _outcomes(logs, _append_round(logs, "failed"))
    await asyncio.wait_for(store.write_failed(), WAIT_S)
    attempts = faulty.sync_attempts
    faulty.heal()
    await store.delete(logs[0].topic_partition)
    with pytest.raises(LogFailed):
        await store.checkpoint()
    await store.close()
    assert faulty.sync_attempts == attempts


async def test_a_checkpoint_due_by_time_after_a_failure_syncs_nothing() -> None:
    """The last round before the failure set the checkpoint timer: when it fires, the
    failed store starts no checkpoint. (The timer runs on the event loop's own clock, so
    the test waits past it in real time.)"""
    faulty = FaultyFileSystem(SimulatedFileSystem())
    interval_ms = 50
    settings = dataclasses.replace(QUIET, checkpoint_interval_ms=interval_ms)
    store, logs = await _open(faulty, _partitions(3), settings)
    await _acknowledged_rounds(logs, 1)
    faulty.fail_syncs(errno.EIO)
    await _outcomes(logs, _append_round(logs, "failed"))
    await asyncio.wait_for(store.write_failed(), WAIT_S)
    attempts = faulty.sync_attempts
    faulty.heal()
    await asyncio.sleep(3 * interval_ms / 1000)
    await store.close()
    assert faulty.sync_attempts == attempts


class GatedFileSystem(FaultyFileSystem):
    """Holds every fsync of a file (a flush round's) and every ``sync_all`` (a
    checkpoint's) until the test opens its gate; says when one is held."""

    def __init__(self, inner: SimulatedFileSystem) -> None:
        super().__init__(inner)
        self.round_held, self.round_gate = threading.Event(), threading.Event()
        self.checkpoint_held, self.checkpoint_gate = threading.Event(), threading.Event()

    def fsync(self, descriptor: int) -> None:
        self.round_held.set()
        assert self.round_gate.wait(WAIT_S)
        super().fsync(descriptor)

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        self.checkpoint_held.set()
        assert self.checkpoint_gate.wait(WAIT_S)
        super().sync_all(paths, directories)


async def test_a_round_syncing_while_a_checkpoint_fails_acknowledges_nothing() -> None:
    """A flush round in a worker thread is syncing the write-ahead log when the restart's
    checkpoint fails to sync a segment file (an error of that file alone: the round's
    own fsync then succeeds). The store has failed: the round must not advance the high
    watermark, or consumers would read, and producers asking later be acknowledged,
    records written after the failure."""
    first = SimulatedFileSystem()
    store, logs = await _open(first, _partitions(3))
    acknowledged = await _acknowledged_rounds(logs, ACKNOWLEDGED_ROUNDS)
    simulated = first.after_power_loss()
    await store.close()

    gated = GatedFileSystem(simulated)
    gated.round_gate.set()  # recovery's own fsync passes
    settings = dataclasses.replace(QUIET, inline_write_max_us=0)  # rounds in a worker thread
    store, logs = await _open(gated, list(acknowledged), settings)
    gated.round_gate.clear()
    gated.round_held.clear()
    in_flight = _append_round(logs, "in-flight")
    waits = asyncio.ensure_future(_outcomes(logs, in_flight))
    assert await asyncio.to_thread(gated.round_held.wait, WAIT_S)
    assert await asyncio.to_thread(gated.checkpoint_held.wait, WAIT_S)
    gated.fail_syncs(errno.EIO)
    gated.checkpoint_gate.set()
    await asyncio.wait_for(store.write_failed(), WAIT_S)
    gated.heal()
    gated.round_gate.set()
    outcomes = await waits
    assert all(isinstance(outcome, LogFailed) for outcome in outcomes), outcomes
    await store.close()  # the round has ended
    for log in logs:
        assert log.high_watermark == acknowledged[log.topic_partition][-1][0] + RECORDS_PER_BATCH
    await _assert_recovered(simulated, acknowledged, in_flight, seed=0)
