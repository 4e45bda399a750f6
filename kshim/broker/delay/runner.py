"""The work of delayed delivery's background job (kshim/broker/jobs/ runs it when woken):
read new ``T.delay`` records into the schedule, deliver what is due, and say how long to
sleep until the next due time or a new record."""

from __future__ import annotations

import asyncio

from kshim.broker.delay.chunk_worker import WORKER_IDLE_S
from kshim.broker.delay.dispatcher import deliver_due, settle_deliveries
from kshim.broker.delay.ingest import DelayHost, ingest_partition
from kshim.broker.delay.naming import reserved_for_delay
from kshim.broker.delay.service import MAX_SLEEP_S
from kshim.storage.interface import TopicPartition


async def resume_delays(host: DelayHost) -> None:
    """What the job does first: settles a delivery under way, then has every ``T.delay``
    partition looked at, so reading resumes where it stopped."""
    await settle_deliveries(host)
    for name, topic in list(host.topics.by_name.items()):
        if reserved_for_delay(name):
            for index in range(topic.record.partitions):
                host.delays.notify(TopicPartition(name, index))


async def delay_turn(host: DelayHost) -> float | None:
    """One turn of reading and delivering; returns how long the job may sleep before the
    next, in seconds (0: not at all; None: until a new record). Due times are decided on
    the wall clock and the sleep is at most MAX_SLEEP_S while anything is pending, so a
    record is never delivered before its due time by the broker's clock."""
    schedule = host.delays
    # A few chunks of each partition with new records (ingest.CHUNKS_PER_TURN), then
    # one delivery, in turn: a large backlog must not hold back records already due.
    for delay_partition in schedule.take_all_new():
        if await ingest_partition(host, delay_partition):
            schedule.notify(delay_partition)  # more may follow: read on next turn
    async with schedule.lock:  # load the minutes falling due, split what comes near
        splitting = await asyncio.to_thread(schedule.store.maintain, host.clock())
    delivered = await deliver_due(host)
    await asyncio.to_thread(schedule.store.release)  # storage/schedule/delay_store.py says why
    if delivered or splitting or schedule.wake_up.is_set():
        return 0
    next_wake = await asyncio.to_thread(schedule.store.next_wake)
    timeout = None
    if next_wake is not None:
        timeout = min(MAX_SLEEP_S, max(0.0, (next_wake - host.clock()) / 1000))
    if schedule.chunk_worker.running and await asyncio.to_thread(
        schedule.chunk_worker.close_if_idle
    ):  # look again once it may have been idle long enough
        timeout = min(timeout if timeout is not None else WORKER_IDLE_S, WORKER_IDLE_S)
    return timeout
