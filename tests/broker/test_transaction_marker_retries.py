"""Markers that could not be written are retried in the background until they land.

As Kafka's TransactionMarkerChannelManager does: the transaction stays PrepareCommit or
PrepareAbort meanwhile (its producer gets CONCURRENT_TRANSACTIONS and retries), and
once the storage takes writes again the markers are written and the transaction
completes, without a restart. Failures are injected at the storage seam: the in-memory
twin's log refuses appends (LogFailed) until it is opened again (transaction_support).
The retry loop's pauses go through a stepped fake sleep, so nothing sleeps for real.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kshim.broker.transactions.coordinator import TransactionSettings
from kshim.broker.transactions.markers import ABORT, COMMIT
from kshim.broker.transactions.transaction_states import TransactionState as State
from kshim.protocol.errors import ErrorCode
from kshim.storage.meta.transaction_store import AbortedTransaction, TransactionRecord
from kshim.testing import FakeClock
from tests.broker.transaction_support import (
    FIRST,
    SECOND,
    START_MS,
    TRANSACTIONAL_ID,
    Transactions,
)

FAILED_ATTEMPTS = 6  # enough for the backoff to reach its bound (100 ms doubling to 1 s)


@pytest.fixture
async def txn(tmp_path: Path) -> AsyncIterator[Transactions]:
    transactions = Transactions(tmp_path, FakeClock(START_MS), TransactionSettings())
    await transactions.open_logs()
    yield transactions
    await transactions.close()


@pytest.fixture
async def retrying(txn: Transactions) -> AsyncIterator[asyncio.Task[None]]:
    """The broker's "transaction markers" job, running; cancelled at the end, and it must
    not have ended on its own (an exception nobody retrieved)."""
    task = asyncio.create_task(txn.coordinator.run_marker_retries())
    yield task
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_commit_markers_land_once_writes_work_again(
    txn: Transactions, retrying: asyncio.Task[None]
) -> None:
    producer = await txn.begin(FIRST, SECOND)
    await txn.fail_writes(FIRST)

    assert await txn.end(producer, commit=True) == ErrorCode.none  # decided: PrepareCommit
    assert txn.record().state == State.PREPARE_COMMIT
    assert txn.coordinator.marker_retries.pending() == [TRANSACTIONAL_ID]
    for _ in range(FAILED_ATTEMPTS):
        await txn.retry_markers()
    assert txn.record().state == State.PREPARE_COMMIT
    assert txn.coordinator.marker_retries.attempts == FAILED_ATTEMPTS
    assert await txn.end(producer, commit=True) == ErrorCode.concurrent_transactions
    new_instance = await txn.init()
    assert new_instance.error == ErrorCode.concurrent_transactions
    assert txn.completed == []

    await txn.restore_writes(FIRST)
    await txn.retry_markers()

    assert txn.record().state == State.COMPLETE_COMMIT
    assert txn.coordinator.marker_retries.pending() == []
    assert await txn.markers(FIRST) == [(1, COMMIT)]
    assert await txn.markers(SECOND) == [(1, COMMIT)]
    assert txn.completed == [(True, [])]  # the completion callback ran once
    assert await txn.end(producer, commit=True) == ErrorCode.none  # the client's retry
    # Bounded exponential backoff: 100 ms doubling, never above 1 s.
    expected = txn.settings.marker_retries.backoffs_ms(FAILED_ATTEMPTS + 1)
    assert txn.sleep.pauses_s == [pause / 1000 for pause in expected]
    assert max(txn.sleep.pauses_s) == 1.0


async def test_abort_markers_and_their_index_land_once_writes_work_again(
    txn: Transactions, retrying: asyncio.Task[None]
) -> None:
    producer = await txn.begin(FIRST)
    await txn.fail_writes(FIRST)

    assert await txn.end(producer, commit=False) == ErrorCode.none
    await txn.retry_markers()
    assert txn.record().state == State.PREPARE_ABORT
    await txn.restore_writes(FIRST)
    await txn.retry_markers()

    assert txn.record().state == State.COMPLETE_ABORT
    assert await txn.markers(FIRST) == [(1, ABORT)]
    expected = AbortedTransaction(producer.producer_id, 0, 1)
    assert expected in txn.coordinator.partition(FIRST).aborted
    assert expected in await asyncio.to_thread(txn.metadata.transactions.aborted, FIRST)
    assert txn.completed == [(False, [])]


async def test_the_next_transaction_goes_through_once_the_markers_landed(
    txn: Transactions, retrying: asyncio.Task[None]
) -> None:
    """What a producer that retries CONCURRENT_TRANSACTIONS sees: its next transaction
    starts once the job has written the markers, and the retry loop goes back to waiting."""
    producer = await txn.begin(FIRST)
    await txn.fail_writes(FIRST)
    assert await txn.end(producer, commit=True) == ErrorCode.none
    assert await txn.add(producer, SECOND) == {SECOND: ErrorCode.concurrent_transactions}

    await txn.restore_writes(FIRST)
    await txn.retry_markers()

    assert await txn.add(producer, SECOND) == {SECOND: ErrorCode.none}
    assert txn.record().state == State.ONGOING
    pauses = len(txn.sleep.pauses_s)
    await asyncio.sleep(0)
    assert txn.coordinator.marker_retries.idle.is_set()  # waits for work, not on a timer
    assert len(txn.sleep.pauses_s) == pauses


async def test_a_transaction_found_prepared_at_start_is_retried_until_it_completes(
    txn: Transactions,
) -> None:
    """A restart completes a prepared transaction; when that fails too (here the group
    offsets' store, a completion callback, fails twice), the load queues it and the job,
    started after the load as lifecycle.py does, finishes it: one marker, applied once."""
    producer = await txn.begin(FIRST)
    await txn.fail_writes(FIRST)
    assert await txn.end(producer, commit=True) == ErrorCode.none
    failures = 2

    def failing_offsets_store(_record: TransactionRecord, _committed: bool) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise OSError("injected: the offsets store cannot write")

    await txn.restart(first_callback=failing_offsets_store)
    assert txn.record().state == State.PREPARE_COMMIT
    assert txn.coordinator.marker_retries.pending() == [TRANSACTIONAL_ID]

    task = asyncio.create_task(txn.coordinator.run_marker_retries())
    await txn.retry_markers()
    assert txn.record().state == State.PREPARE_COMMIT
    await txn.retry_markers()

    assert txn.record().state == State.COMPLETE_COMMIT
    assert await txn.markers(FIRST) == [(1, COMMIT)]  # written once, not per attempt
    assert txn.completed == [(True, [])]
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
