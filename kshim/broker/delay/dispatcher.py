"""From the schedule to ``T``: due records appended in due order, each exactly once.

A turn takes the due records off the schedule (kshim/storage/schedule/delay_store.py), notes in
the store, durably, which they are and where each topic's log ended; appends them (no
producer id, the original timestamps, keys, values and headers, plus
``kshim-delayed-from``) and waits until they are durable; then moves the schedule's
delivery marks past them and drops the note in one store transaction. A broker that
stops in between finds the note at start (``settle_deliveries``), reads each ``T`` from
the noted offset and appends only the records whose ``kshim-delayed-from`` it does not
find there, before finishing the turn. So each record appears once, across kill -9
and power loss, the way the full-data view checks its applied position against its log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from kshim.broker.delay.ingest import DelayHost
from kshim.broker.delay.naming import DELAYED_FROM_HEADER, delayed_from
from kshim.protocol.packed_record import unpack_record
from kshim.protocol.record_batch import iter_batches, read_header, set_log_append_time
from kshim.protocol.records import Record, build_batch, decode_records
from kshim.storage.interface import PartitionLog, TopicPartition, chunks_bytes
from kshim.storage.schedule.delay_records import DelayedRecord

log = logging.getLogger(__name__)

DELIVERY_RECORDS = 20_000  # due records taken from the schedule at a time (~3 MB)
DELIVERY_BYTES = 512 << 10  # of one appended batch, well under max.message.bytes
SCAN_BYTES = 1 << 20


async def deliver_due(host: DelayHost) -> int:
    """Delivers up to DELIVERY_RECORDS records due now; returns how many."""
    schedule = host.delays
    store = schedule.store
    async with schedule.lock:
        if store.turn_under_way:  # a turn failed part-way: finish it first
            await _settle(host)
        try:
            return await _turn(host)
        except BaseException:
            # Records were taken off the schedule in memory only: it is rebuilt from
            # disk (and a noted turn finished) before the next turn.
            store.turn_under_way = True
            raise


async def _turn(host: DelayHost) -> int:
    """Takes the records due now off the schedule, notes them, appends them, finishes."""
    store = host.delays.store
    now = host.clock()
    await asyncio.to_thread(store.maintain, now, False)  # the minutes falling due
    turn = await asyncio.to_thread(store.take_due, now, DELIVERY_RECORDS)
    if not turn.records:
        if turn.marks:  # only cancelled records were due
            await asyncio.to_thread(store.finish_turn, turn, host.clock())
        return 0
    by_target = _by_target(turn.records)
    for target in by_target:
        partition_log = host.topics.log(target)
        if partition_log is not None:
            turn.from_offsets[target] = partition_log.log_end_offset
    await asyncio.to_thread(store.begin_turn, turn)
    for target, records in by_target.items():
        await _append(host, target, records)
    delivered_at = host.clock()
    lateness = [max(0, delivered_at - record.due_ms) for record in turn.records]
    await asyncio.to_thread(store.finish_turn, turn, delivered_at, lateness)
    return len(turn.records)


def _by_target(records: Sequence[DelayedRecord]) -> dict[TopicPartition, list[DelayedRecord]]:
    by_target: dict[TopicPartition, list[DelayedRecord]] = {}
    for record in records:
        by_target.setdefault(record.target, []).append(record)
    return by_target


async def _append(host: DelayHost, target: TopicPartition, records: list[DelayedRecord]) -> None:
    """The records appended as batches of at most DELIVERY_BYTES and made durable (one
    wait for the lot, which is what keeps a burst falling due together fast); nothing
    for a topic deleted meanwhile."""
    partition_log = host.topics.log(target)
    topic = host.topics.get(target.topic)
    if partition_log is None or topic is None or not records:
        return
    batches = await asyncio.to_thread(lambda: [delivery_batch(part) for part in _parts(records)])
    log_append_time = topic.configs["message.timestamp.type"] == "LogAppendTime"
    last_offset = -1
    for built in batches:
        batch = bytearray(built)
        if log_append_time:
            set_log_append_time(batch, host.clock())
        header = read_header(batch)  # built here, CRC and all: nothing to validate
        last_offset = partition_log.append(batch, header) + header.last_offset_delta
    await partition_log.wait_durable(last_offset)


def delivery_batch(records: Sequence[DelayedRecord]) -> bytes:
    """One batch of the records as ``T`` gets them: dense offsets from 0, each with its
    original timestamp, key, value and headers and where it came from."""
    delivered = []
    for index, record in enumerate(records):
        original = unpack_record(record.packed, index)
        source = (DELAYED_FROM_HEADER, delayed_from(record.target.partition, record.source_offset))
        delivered.append(Record(index, original.timestamp, original.key, original.value,
                                (*original.headers, source)))  # fmt: skip
    return build_batch(delivered)


def _parts(records: list[DelayedRecord]) -> list[list[DelayedRecord]]:
    """``records`` in order, cut into batches of at most about DELIVERY_BYTES."""
    parts: list[list[DelayedRecord]] = [[]]
    size = 0
    for record in records:
        if parts[-1] and size + len(record.packed) > DELIVERY_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(record)
        size += len(record.packed)
    return parts


async def settle_deliveries(host: DelayHost) -> None:
    """At start (under the schedule's lock): rebuilds the schedule in memory and
    finishes a turn the broker did not, appending the records that had not reached
    their topics."""
    async with host.delays.lock:
        await _settle(host)


async def _settle(host: DelayHost) -> None:
    store = host.delays.store
    turn = await asyncio.to_thread(store.resume_turn, host.clock())
    if turn is None:
        return
    for target, records in _by_target(turn.records).items():
        from_offset = turn.from_offsets.get(target)
        arrived = await _arrived(host.topics.log(target), from_offset, records)
        log.info("%s: a delivery of %d delayed records was under way at the last stop; "
                 "%d had arrived", target, len(records), len(arrived))  # fmt: skip
        if from_offset is not None:  # no log then: the topic was being deleted
            await _append(host, target, [r for r in records if r.seq not in arrived])
    # When they arrived is not kept: they count as delivered at this start, the latest
    # they can have been, so ``kshim delays`` counts every delivered record.
    now = host.clock()
    lateness = [max(0, now - record.due_ms) for record in turn.records]
    await asyncio.to_thread(store.finish_turn, turn, now, lateness)


async def _arrived(
    partition_log: PartitionLog | None, from_offset: int | None, records: list[DelayedRecord]
) -> set[int]:
    """The seqs of ``records`` found in ``T`` at or after ``from_offset``."""
    if partition_log is None or from_offset is None:
        return set()
    by_source = {delayed_from(r.target.partition, r.source_offset): r.seq for r in records}
    found: set[int] = set()
    offset = max(from_offset, partition_log.log_start_offset)
    while offset < partition_log.high_watermark:
        result = await partition_log.read(offset, SCAN_BYTES)
        if result.end_offset <= offset:
            break
        data = await asyncio.to_thread(chunks_bytes, result.chunks)
        found.update(_sources_in(data, by_source))
        offset = result.end_offset
    return found


def _sources_in(data: bytes, by_source: dict[bytes, int]) -> list[int]:
    view = memoryview(data)
    found = []
    for position, header in iter_batches(view):
        if header.is_control or header.has_producer_id:
            continue  # deliveries carry no producer id
        for record in decode_records(view[position : position + header.size])[1]:
            for name, value in record.headers:
                if name == DELAYED_FROM_HEADER and value in by_source:
                    found.append(by_source[value])
    return found
