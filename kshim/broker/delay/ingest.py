"""From ``T.delay`` to the schedule: decided records read in chunks, each chunk filed
(kshim/broker/delay/chunks.py; in a worker process when it is large,
kshim/broker/delay/chunk_worker.py) and committed with the new read position in one
store transaction, the next chunk being filed meanwhile.

Only what a read_committed consumer would see is read (up to the last stable offset,
aborted transactions and markers skipped, KIP-98), so a delayed record produced in a
transaction is scheduled when it commits and never if it aborts.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple, Protocol

from kshim.broker.clock import BrokerClock
from kshim.broker.delay.chunks import ChunkRequest, file_request
from kshim.broker.delay.naming import target_of
from kshim.broker.delay.service import DelaySchedule
from kshim.broker.topics import TopicManager
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.storage.interface import PartitionLog, TopicPartition, chunks_bytes
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.storage.schedule.delay_filing import FiledChunk
from kshim.storage.schedule.delay_records import StaleChunk
from kshim.storage.schedule.delay_store import DelayStore

CHUNK_BYTES = 1 << 20  # of T.delay per store transaction
# Chunks read per turn of the runner, one filed while the one before it is committed; a
# large backlog being read holds back records falling due by at most this many chunks.
CHUNKS_PER_TURN = 4


class DelayHost(Protocol):
    """What delayed delivery needs of the broker (kshim.broker.broker.Broker)."""

    topics: TopicManager
    transactions: TransactionCoordinator
    delays: DelaySchedule
    clock: BrokerClock


async def ingest_partition(host: DelayHost, delay_partition: TopicPartition) -> bool:
    """Reads up to CHUNKS_PER_TURN chunks of the ``T.delay`` partition into the schedule;
    returns whether the read position advanced.

    Each chunk is filed (in the chunk worker when it is large) while the one before it is
    committed: the next chunk is filed from the state the store will have once that one
    is in (its seqs taken, its end the read position). A chunk filed from a state that
    did not come about (the commit failed, or anything else changed it) is filed again
    here from the store's actual state before it is committed."""
    partition_log = host.topics.log(delay_partition)
    target = target_of(delay_partition.topic)
    if partition_log is None or target is None:
        return False
    schedule = host.delays
    target_partition = TopicPartition(target, delay_partition.partition)
    position = max(await schedule.position(delay_partition), partition_log.log_start_offset)
    read = await _read_chunk(host, partition_log, delay_partition, position)
    if read is None:
        return False
    async with schedule.lock:
        if host.topics.log(delay_partition) is not partition_log:
            return False  # deleted (and perhaps re-created) while the chunk was read
        # Filed and committed under the lock: a chunk is filed from the store's state
        # (next seq, delivery marks), which only the holder of the lock changes.
        request = await asyncio.to_thread(
            _request, schedule.store, read, delay_partition, target_partition, host.clock()
        )
        await _file_and_commit(host, partition_log, (request, read.end_offset), target_partition)
    return True


async def _file_and_commit(
    host: DelayHost,
    partition_log: PartitionLog,
    first: tuple[ChunkRequest, int],
    target: TopicPartition,
) -> None:
    """Files and commits ``first`` (a request and the offset its chunk ends at) and up to
    CHUNKS_PER_TURN - 1 chunks after it, each filed while the one before it commits."""
    schedule = host.delays
    request, end_offset = first
    source = request.source
    filing = asyncio.ensure_future(asyncio.to_thread(schedule.chunk_worker.file, request))
    for turn in range(CHUNKS_PER_TURN):
        chunk = await filing
        following = None
        if turn + 1 < CHUNKS_PER_TURN:
            following = await _following(host, partition_log, source, chunk, end_offset)
        if following is not None:
            filing = asyncio.ensure_future(
                asyncio.to_thread(schedule.chunk_worker.file, following[0])
            )
        try:
            await asyncio.to_thread(_commit, schedule.store, (request, chunk), target, end_offset)
        except BaseException:
            if following is not None:  # the worker's answer is waited for, and dropped
                await asyncio.wait([filing])
            raise
        schedule.set_position(source, end_offset)
        if following is None:
            return
        request, end_offset = following


async def _following(
    host: DelayHost,
    partition_log: PartitionLog,
    source: TopicPartition,
    chunk: FiledChunk,
    position: int,
) -> tuple[ChunkRequest, int] | None:
    """A request for the chunk from ``position`` on, filed from the state the store will
    be in once ``chunk`` is committed (with its end offset); None if nothing follows."""
    read = await _read_chunk(host, partition_log, source, position)
    if read is None:
        return None
    request = ChunkRequest(read.data, read.aborted, source, position,
                           chunk.first_seq + chunk.seqs, chunk.topic_id, host.clock(),
                           chunk.near)  # fmt: skip
    return request, read.end_offset


class _Read(NamedTuple):
    data: bytes
    aborted: list[AbortedTransaction]
    end_offset: int


async def _read_chunk(
    host: DelayHost, partition_log: PartitionLog, delay_partition: TopicPartition, position: int
) -> _Read | None:
    """The decided batches from ``position`` on, up to CHUNK_BYTES; None if there are none."""
    transactions = host.transactions.partition(delay_partition)
    stable = transactions.last_stable_offset(partition_log.high_watermark)
    if position >= stable:
        return None
    result = await partition_log.read(position, CHUNK_BYTES, stable)
    if result.end_offset <= position:
        return None
    data = await asyncio.to_thread(chunks_bytes, result.chunks)
    return _Read(data, list(transactions.aborted), result.end_offset)


def _request(
    store: DelayStore, read: _Read, source: TopicPartition, target: TopicPartition, now_ms: int
) -> ChunkRequest:
    """Blocking: a request to file ``read`` of ``source`` from the store's state."""
    return ChunkRequest(read.data, read.aborted, source, store.position(source),
                        store.next_seq, store.topic_id(target.topic), now_ms,
                        store.near_buckets())  # fmt: skip


def _commit(
    store: DelayStore,
    filed: tuple[ChunkRequest, FiledChunk],
    target: TopicPartition,
    next_position: int,
) -> None:
    """Blocking: commits a filed chunk; one filed from a state the store is not in is
    filed again here, from the store's state, and committed."""
    request, chunk = filed
    try:
        store.commit_chunk(request.source, target, chunk, next_position)
    except StaleChunk:
        read = _Read(request.data, request.aborted, next_position)
        fresh = _request(store, read, request.source, target, request.now_ms)
        store.commit_chunk(request.source, target, file_request(fresh), next_position)
