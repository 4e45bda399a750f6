"""``kshim delays --export-to``: a stopped broker's pending delayed records, produced again to
``T.delay`` on a Kafka cluster whose gateways deliver them (``kshim gateway --delay``).

Moving a kshim's topics to a Kafka cluster loses nothing of ``T`` (its records can be
copied), but its pending delayed records are in the broker's schedule, not in a topic
(``T.delay`` is write-only: docs/delayed-delivery.md). Each one is produced to the
cluster's ``T.delay``, same partition, with its key, value, timestamp and headers, its
delay headers replaced by one ``kshim-deliver-at`` holding the due time the broker had
computed, so it falls due when it would have on the broker (a due time already past is
delivered at once). Cancelled records are not pending, so they are not exported. The
producer is idempotent with acks=all, and the export ends with each partition's records
acknowledged; run it once per data directory (a second run produces them again).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

from kshim.broker.delay.naming import (
    CANCEL_HEADER,
    DELAY_MS_HEADER,
    DELIVER_AT_HEADER,
    REPLACE_HEADER,
    delay_name,
)
from kshim.client.security import ClientSecurity
from kshim.gateway.delay.upstream import Upstream
from kshim.protocol.packed_record import unpack_record
from kshim.storage.schedule.delay_records import DelayedRecord
from kshim.storage.schedule.delay_store import DelayStore

# Replaced by the due time: a record exported must fall due once, when the broker said.
DELAY_HEADERS = frozenset({DELIVER_AT_HEADER, DELAY_MS_HEADER, CANCEL_HEADER, REPLACE_HEADER})
EVERY_PENDING = 1 << 62  # peek's limit: all of them


def pending_records(data_dir: str) -> list[DelayedRecord]:
    """Every pending record of the broker whose data directory is ``data_dir``, in due
    order (read-only: the broker should be stopped, or its later deliveries are missed)."""
    store = DelayStore(os.path.join(data_dir, "delays"), readonly=True)
    try:
        return store.peek(EVERY_PENDING)
    finally:
        store.close()


def export_delays(
    records: Sequence[DelayedRecord], bootstrap: str, security: ClientSecurity | None
) -> int:
    """Produces ``records`` to their ``T.delay`` at ``bootstrap``; returns how many."""
    return asyncio.run(_produce_all(records, Upstream(bootstrap, security)))


async def _produce_all(records: Sequence[DelayedRecord], upstream: Upstream) -> int:
    producer = AIOKafkaProducer(acks="all", enable_idempotence=True, **upstream.options())
    await producer.start()
    try:
        sent = [await _send(producer, record) for record in records]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    return len(records)


async def _send(producer: AIOKafkaProducer, delayed: DelayedRecord) -> asyncio.Future[object]:
    record = unpack_record(delayed.packed, delayed.source_offset)
    headers = [(name, value) for name, value in record.headers if name not in DELAY_HEADERS]
    headers.append((DELIVER_AT_HEADER, str(delayed.due_ms).encode()))
    future: asyncio.Future[object] = await producer.send(
        delay_name(delayed.target.topic),
        value=record.value,
        key=record.key,
        partition=delayed.target.partition,
        timestamp_ms=record.timestamp if record.timestamp >= 0 else None,
        headers=headers,
    )
    return future
