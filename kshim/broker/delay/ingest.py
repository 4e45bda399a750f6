"""From ``T.delay`` to the schedule: decided records read in chunks, each becoming a
scheduled record or a cancellation, with the new read position, in one store transaction.

Only what a read_committed consumer would see is read (up to the last stable offset,
aborted transactions and markers skipped, KIP-98), so a delayed record produced in a
transaction is scheduled when it commits and never if it aborts. Records keep their
key, value, headers and timestamp.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from kshim.broker.delay.naming import target_of
from kshim.broker.delay.requests import InvalidDelay, read_request
from kshim.broker.delay.service import DelaySchedule
from kshim.broker.topics import TopicManager
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.broker.transactions.partition_state import is_aborted
from kshim.protocol.packed_record import pack_record
from kshim.protocol.primitives import DecodeError
from kshim.protocol.record_batch import iter_batches
from kshim.protocol.records import RecordView, decode_views
from kshim.storage.delay_store import ScheduleChange, new_change
from kshim.storage.interface import TopicPartition, chunks_bytes
from kshim.storage.transaction_store import AbortedTransaction

log = logging.getLogger(__name__)

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
    changes = schedule_changes(data, list(transactions.aborted), delay_partition)
    async with schedule.lock:
        if host.topics.log(delay_partition) is not partition_log:
            return False  # deleted (and perhaps re-created) while the chunk was read
        await asyncio.to_thread(
            schedule.store.schedule,
            delay_partition,
            target_partition,
            changes,
            result.end_offset,
            host.clock(),
        )
        schedule.set_position(delay_partition, result.end_offset)
    return True


def schedule_changes(
    batches: bytes, aborted: Sequence[AbortedTransaction], source: TopicPartition
) -> list[ScheduleChange]:
    """The changes of the decided records in ``batches`` (stored batches of the
    ``source`` partition of a delay topic), in offset order."""
    view = memoryview(batches)
    changes: list[ScheduleChange] = []
    for position, header in iter_batches(view):
        if header.is_control or is_aborted(header, aborted):
            continue
        try:
            _, records = decode_views(view[position : position + header.size])
        except DecodeError as error:  # Produce checked it: only a damaged disk gets here
            log.error("%s: batch at %d unreadable, not scheduled: %s",
                      source, header.base_offset, error)  # fmt: skip
            continue
        _add_changes(changes, records, source)
    return changes


def _add_changes(
    changes: list[ScheduleChange], records: list[RecordView], source: TopicPartition
) -> None:
    # Nothing per record that is not needed: this runs for every record of every delay
    # topic, and sets the rate at which the schedule fills.
    append = changes.append
    for record in records:
        try:
            due_ms, cancels = read_request(record)
        except InvalidDelay as error:  # accepted under other rules, or by an older kshim
            log.warning("%s: record %d of its delay topic not scheduled: %s",
                        source, record.offset, error)  # fmt: skip
            continue
        packed = None if due_ms is None else pack_record(record)
        append(new_change((record.offset, record.key, cancels, due_ms, packed)))
