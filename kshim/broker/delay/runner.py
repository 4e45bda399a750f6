"""The background job of delayed delivery: read new ``T.delay`` records into the
schedule, deliver what is due, sleep until the next due time or a new record."""

from __future__ import annotations

import asyncio
import contextlib

from kshim.broker.delay.dispatcher import deliver_due, settle_deliveries
from kshim.broker.delay.ingest import DelayHost, ingest_partition
from kshim.broker.delay.naming import reserved_for_delay
from kshim.broker.delay.service import MAX_SLEEP_S
from kshim.storage.interface import TopicPartition

# The schedule's memory map is released before a sleep at least this long (the next due
# record further off, or none): storage/delay_store.py says why.
RELEASE_AFTER_S = 0.05


async def run_delays(host: DelayHost) -> None:
    """Runs until cancelled. Sleeps on the event loop's monotonic clock and decides on
    wall-clock due times, waking at least every MAX_SLEEP_S while anything is pending, so
    a record is never delivered before its due time by the broker's clock."""
    schedule = host.delays
    await settle_deliveries(host)
    for name, topic in list(host.topics.by_name.items()):  # resume where reading stopped
        if reserved_for_delay(name):
            for index in range(topic.record.partitions):
                schedule.notify(TopicPartition(name, index))
    while True:
        schedule.wake_up.clear()
        while (delay_partition := schedule.take_new()) is not None:
            while await ingest_partition(host, delay_partition):
                pass
        while await deliver_due(host):
            pass
        next_due = await asyncio.to_thread(schedule.store.next_due)
        if schedule.wake_up.is_set():
            continue
        timeout = None
        if next_due is not None:
            timeout = min(MAX_SLEEP_S, max(0.0, (next_due - host.clock()) / 1000))
        if timeout is None or timeout >= RELEASE_AFTER_S:
            await asyncio.to_thread(schedule.store.release)  # no work for a while
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(schedule.wake_up.wait(), timeout)
