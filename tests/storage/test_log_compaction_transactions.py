"""Compaction and transactions, over every log store: Kafka's cleaner's rules.

Aborted transactions' records go at once. A COMMIT or ABORT marker stays while any batch
of its transaction is still in the log; once none is, the next pass gives it a delete
horizon, and a pass after the horizon removes it. A producer's last batch stays, emptied,
so that its sequence survives. Recovery then never finds transactional records without
their marker (an open transaction would hold the last stable offset back for ever).
"""

from __future__ import annotations

from kshim.broker.transactions.markers import marker_batch
from kshim.protocol.record_batch import TRANSACTIONAL_FLAG_MASK, BatchHeader, iter_batches
from kshim.protocol.records import BatchSpec
from kshim.storage.meta.transaction_store import AbortedTransaction
from tests.storage.compaction_support import (
    NOW_MS,
    ONE_BATCH_SEGMENTS,
    append,
    append_writes,
    compact,
    keyed_batch,
    read_records,
    request,
)
from tests.storage.conformance import Harness
from tests.storage.support import read_everything

RETENTION_MS = 1_000
PRODUCER = 9


def _transactional(sequence: int) -> BatchSpec:
    return BatchSpec(
        attributes=TRANSACTIONAL_FLAG_MASK,
        producer_id=PRODUCER,
        producer_epoch=0,
        base_sequence=sequence,
    )


async def _markers(harness_log_data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(harness_log_data) if header.is_control]


async def test_an_aborted_transactions_records_go_and_its_marker_later(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    aborted_writes = [(b"a", b"aborted"), (b"b", b"aborted")]
    await append(log, *keyed_batch(aborted_writes, spec=_transactional(0)))
    await append(log, marker_batch(PRODUCER, 0, commit=False, now_ms=1_000))  # offset 2
    await append_writes(log, [(b"c", b"1"), (b"end", b"")])
    aborted = [AbortedTransaction(PRODUCER, 0, 2)]

    async def pass_at(now_ms: int) -> tuple[list[bytes | None], list[int]]:
        await compact(harness.store, log, request(now_ms, RETENTION_MS, aborted=aborted))
        keys = [record.key for record in await read_records(log) if record.offset != 2]
        return keys, await _markers(await read_everything(log))

    assert await pass_at(NOW_MS) == ([b"c", b"end"], [2])  # its batch was still there
    assert await pass_at(NOW_MS) == ([b"c", b"end"], [2])  # now gets a delete horizon
    assert await pass_at(NOW_MS + RETENTION_MS - 1) == ([b"c", b"end"], [2])
    assert await pass_at(NOW_MS + RETENTION_MS) == ([b"c", b"end"], [])
    assert log.log_end_offset == 5


async def test_a_commit_marker_stays_while_its_records_do(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append(log, *keyed_batch([(b"a", b"1"), (b"b", b"1")], spec=_transactional(0)))
    await append(log, marker_batch(PRODUCER, 0, commit=True, now_ms=1_000))  # offset 2
    await append_writes(log, [(b"end", b"")])
    for _ in range(3):
        await compact(harness.store, log, request(NOW_MS + RETENTION_MS, RETENTION_MS))
        data = await read_everything(log)
        assert await _markers(data) == [2]
        assert [record.key for record in await read_records(log)][:2] == [b"a", b"b"]
    recovered: list[BatchHeader] = []
    await harness.reopen(ONE_BATCH_SEGMENTS, on_batch=recovered.append)
    assert [header.is_control for header in recovered if header.is_transactional] == [
        False, True,
    ]  # fmt: skip


async def test_a_commit_marker_goes_once_its_records_were_superseded(harness: Harness) -> None:
    log = await harness.open(ONE_BATCH_SEGMENTS)
    await append(log, *keyed_batch([(b"a", b"1")], spec=_transactional(0)))
    await append(log, marker_batch(PRODUCER, 0, commit=True, now_ms=1_000))  # offset 1
    await append_writes(log, [(b"a", b"2"), (b"end", b"")])
    passes = [NOW_MS, NOW_MS, NOW_MS + RETENTION_MS]
    markers = []
    for now_ms in passes:
        await compact(harness.store, log, request(now_ms, RETENTION_MS))
        markers.append(await _markers(await read_everything(log)))
    assert markers == [[1], [1], []]
    recovered: list[BatchHeader] = []
    log = await harness.reopen(ONE_BATCH_SEGMENTS, on_batch=recovered.append)
    assert not [header for header in recovered if header.is_transactional]
    assert [(record.offset, record.value) for record in await read_records(log)] == [
        (2, b"2"), (3, b""),
    ]  # fmt: skip
