"""From the schedule to ``T``: due records appended in due order, each exactly once.

A delivery notes in the store, durably, where ``T``'s log ended and which records it is
about to append; appends them as one batch (no producer id, the original timestamps,
keys, values and headers, plus ``kshim-delayed-from``) and waits until that batch is
durable; then removes the records and the note in one store transaction. A broker that
stops in between finds the note at start (``settle_deliveries``) and reads ``T`` from the
noted offset: the records whose ``kshim-delayed-from`` it finds there arrived, the others
are still pending and go out again. So each record appears once, across kill -9 and
power loss, the way the full-data view checks its applied position against its log.
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
from kshim.storage import lmdb_keys as keys
from kshim.storage.delay_store import DelayedRecord, Delivery
from kshim.storage.interface import PartitionLog, TopicPartition, chunks_bytes

log = logging.getLogger(__name__)

DELIVERY_RECORDS = 20_000  # due records taken from the schedule at a time (~3 MB)
DELIVERY_BYTES = 512 << 10  # of one appended batch, well under max.message.bytes
SCAN_BYTES = 1 << 20


async def deliver_due(host: DelayHost) -> int:
    """Delivers up to DELIVERY_RECORDS records due now; returns how many."""
    schedule = host.delays
    async with schedule.lock:
        due = await asyncio.to_thread(schedule.store.due, host.clock(), DELIVERY_RECORDS)
        by_target: dict[TopicPartition, list[DelayedRecord]] = {}
        for record in due:
            by_target.setdefault(record.target, []).append(record)
        for target, records in by_target.items():
            await _deliver(host, target, records)
    return len(due)


async def _deliver(host: DelayHost, target: TopicPartition, records: list[DelayedRecord]) -> None:
    """One note, the records appended as batches of at most DELIVERY_BYTES, one wait until
    they are durable, one store transaction: the two store commits and the log's sync
    are paid once for the lot, which is what keeps a burst falling due together fast."""
    store = host.delays.store
    pending_keys = [record.pending_key for record in records]
    partition_log = host.topics.log(target)
    topic = host.topics.get(target.topic)
    if partition_log is None or topic is None:  # deleted meanwhile: nowhere to go
        await asyncio.to_thread(store.finish_delivery, target, pending_keys)
        return
    await asyncio.to_thread(store.begin_delivery, target, partition_log.log_end_offset, records)
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
    delivered_at = host.clock()
    lateness = [max(0, delivered_at - record.due_ms) for record in records]
    await asyncio.to_thread(store.finish_delivery, target, pending_keys, lateness)


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
    """At start: a delivery the broker did not finish is finished for the records that
    reached ``T`` and forgotten for the others, which stay pending."""
    store = host.delays.store
    for delivery in await asyncio.to_thread(store.deliveries_under_way):
        arrived = await _arrived(host.topics.log(delivery.target), delivery)
        log.info("%s: a delivery of %d delayed records was under way at the last stop; "
                 "%d had arrived", delivery.target, len(delivery.pending_keys),
                 len(arrived))  # fmt: skip
        # When they arrived is not kept: they count as delivered at this start, the
        # latest they can have been, so ``kshim delays`` counts every delivered record.
        now = host.clock()
        lateness = [max(0, now - keys.split_delay_pending_key(key)[0]) for key in arrived]
        await asyncio.to_thread(store.finish_delivery, delivery.target, arrived, lateness)


async def _arrived(partition_log: PartitionLog | None, delivery: Delivery) -> list[bytes]:
    """The pending keys of ``delivery`` whose records are in ``T`` at or after its offset."""
    if partition_log is None:
        return []
    by_source = {
        delayed_from(delivery.target.partition, keys.split_delay_pending_key(key)[2]): key
        for key in delivery.pending_keys
    }
    found: list[bytes] = []
    offset = max(delivery.from_offset, partition_log.log_start_offset)
    while offset < partition_log.high_watermark:
        result = await partition_log.read(offset, SCAN_BYTES)
        if result.end_offset <= offset:
            break
        data = await asyncio.to_thread(chunks_bytes, result.chunks)
        found += _sources_in(data, by_source)
        offset = result.end_offset
    return found


def _sources_in(data: bytes, by_source: dict[bytes, bytes]) -> list[bytes]:
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
