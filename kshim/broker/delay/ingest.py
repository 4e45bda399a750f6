"""From ``T.delay`` to the schedule: decided records read in chunks, each chunk filed
(kshim/broker/delay/chunks.py; in a worker process when it is large,
kshim/broker/delay/chunk_worker.py) and committed with the new read position in one
store transaction.

Only what a read_committed consumer would see is read (up to the last stable offset,
aborted transactions and markers skipped, KIP-98), so a delayed record produced in a
transaction is scheduled when it commits and never if it aborts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from kshim.broker.delay.chunk_worker import ChunkWorker
from kshim.broker.delay.chunks import ChunkRequest
from kshim.broker.delay.naming import target_of
from kshim.broker.delay.service import DelaySchedule
from kshim.broker.topics import TopicManager
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.storage.delay_store import DelayStore
from kshim.storage.interface import TopicPartition, chunks_bytes
from kshim.storage.transaction_store import AbortedTransaction

CHUNK_BYTES = 1 << 20  # of T.delay per store transaction


class DelayHost(Protocol):
    """What delayed delivery needs of the broker (kshim.broker.broker.Broker)."""

    topics: TopicManager
    transactions: TransactionCoordinator
    delays: DelaySchedule
    clock: Callable[[], int]


async def ingest_partition(host: DelayHost, delay_partition: TopicPartition) -> bool:
    """Reads one chunk of the ``T.delay`` partition into the schedule; returns whether
    the read position advanced."""
    partition_log = host.topics.log(delay_partition)
    target = target_of(delay_partition.topic)
    if partition_log is None or target is None:
        return False
    schedule = host.delays
    position = max(await schedule.position(delay_partition), partition_log.log_start_offset)
    transactions = host.transactions.partition(delay_partition)
    stable = transactions.last_stable_offset(partition_log.high_watermark)
    if position >= stable:
        return False
    result = await partition_log.read(position, CHUNK_BYTES, stable)
    if result.end_offset <= position:
        return False
    data = await asyncio.to_thread(chunks_bytes, result.chunks)
    target_partition = TopicPartition(target, delay_partition.partition)
    aborted = list(transactions.aborted)
    async with schedule.lock:
        if host.topics.log(delay_partition) is not partition_log:
            return False  # deleted (and perhaps re-created) while the chunk was read
        # Filed and committed under the lock: the chunk is filed from the store's state
        # (next seq, delivery marks), which only the holder of the lock changes.
        await asyncio.to_thread(
            _file_and_commit,
            schedule.store,
            schedule.chunk_worker,
            (data, aborted, delay_partition, target_partition),
            result.end_offset,
            host.clock(),
        )
        schedule.set_position(delay_partition, result.end_offset)
    return True


def _file_and_commit(
    store: DelayStore,
    worker: ChunkWorker,
    chunk: tuple[bytes, list[AbortedTransaction], TopicPartition, TopicPartition],
    next_position: int,
    now_ms: int,
) -> None:
    """Blocking: files the chunk (in the worker when it is large) and commits it."""
    data, aborted, source, target = chunk
    request = ChunkRequest(data, aborted, source, store.position(source), store.next_seq,
                           store.topic_id(target.topic), now_ms,
                           store.near_buckets())  # fmt: skip
    store.commit_chunk(source, target, worker.file(request), next_position)
