"""Keeping every ``T.full`` up to date with ``T`` (the work of a background job).

For each source partition with something new it reads ``T`` from the view's
applied position up to the last stable offset (so only decided transactions),
has them decoded and committed together with the new applied position in one
LMDB transaction (in a child process by default: worker.py). It wakes on high-watermark advances
(rather than polling), on a view being turned on, and, every
``TOMBSTONE_PURGE_INTERVAL_S``, purges expired tombstones and retries what failed. On
restart every kept view's partitions are looked at once, so the view resumes from its
stored position.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from kshim.broker.append_waiters import AppendWaiters
from kshim.broker.clock import BrokerClock
from kshim.broker.full_view.naming import view_name
from kshim.broker.full_view.view import FullView
from kshim.broker.full_view.worker import ChunkToApply
from kshim.broker.topics import TopicManager
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.progress import Progress, to_log
from kshim.storage.interface import TopicPartition, chunks_bytes

log = logging.getLogger(__name__)

# Source bytes applied per LMDB transaction. Only the last record of each key in a chunk is
# written, so when the view is behind, large chunks skip most superseded records (2,000,000
# updates to 10,000 keys: 8 MiB chunks applied 2.6x faster than 1 MiB ones,
# benchmarks/full_view.py); when it is not behind, a chunk is whatever is new.
CHUNK_BYTES = 8 << 20
TOMBSTONE_PURGE_INTERVAL_S = 1.0
BUILD_PROGRESS_INTERVAL_S = 2.0


class ViewHost(Protocol):
    """What applying a view needs of the broker (kshim.broker.broker.Broker)."""

    topics: TopicManager
    full_view: FullView
    transactions: TransactionCoordinator
    append_waiters: AppendWaiters
    clock: BrokerClock


async def apply_partition_once(broker: ViewHost, topic_partition: TopicPartition) -> bool:
    """Applies one chunk of the source partition; returns whether the view advanced."""
    topic = broker.topics.get(topic_partition.topic)
    partition_log = broker.topics.log(topic_partition)
    if topic is None or partition_log is None or not broker.full_view.keeps(topic):
        return False
    view = broker.full_view
    position = await view.applied_position(topic_partition)
    if position < partition_log.log_start_offset:
        position = await _rebuild(broker, topic_partition, position, partition_log.log_start_offset)
    transactions = broker.transactions.partition(topic_partition)
    stable = transactions.last_stable_offset(partition_log.high_watermark)
    if position >= stable:
        view.caught_up_ms[topic_partition] = broker.clock()
        return False
    result = await partition_log.read(position, CHUNK_BYTES, stable)
    data = await asyncio.to_thread(chunks_bytes, result.chunks)
    if result.end_offset <= position:
        return False
    # Stamped and purged (purge_tombstones_once) by the clock deletions by age go by.
    expiry = broker.clock.expiry_now() + int(topic.configs["delete.retention.ms"])
    async with view.lock:
        if broker.topics.get(topic_partition.topic) is not topic:
            return False  # deleted meanwhile: its view data is gone too
        chunk = ChunkToApply(
            topic_partition, data, list(transactions.aborted), expiry, result.end_offset
        )
        await view.applier.apply(chunk)
        view.set_position(topic_partition, result.end_offset)
    broker.append_waiters.notify(view_partition(topic_partition))
    return True


async def _rebuild(
    broker: ViewHost, topic_partition: TopicPartition, position: int, log_start: int
) -> int:
    """The view missed records that retention removed (the view was off, or was turned on
    for a topic whose history is gone): whatever it holds may be stale, so it is dropped
    and rebuilt from the log's start. Keys whose every record was removed are lost: the
    view can only be as complete as the log it is built from."""
    if position > 0:
        log.warning("%s: view at %d, behind the log start %d: rebuilding from the log",
                    topic_partition, position, log_start)  # fmt: skip
    view = broker.full_view
    async with view.lock:
        await asyncio.to_thread(view.store.reset_partition, topic_partition, log_start)
        view.reset_position(topic_partition, log_start)
    return log_start


async def catch_up(
    broker: ViewHost,
    topic_partition: TopicPartition,
    until: int | None = None,
    progress: Progress | None = None,
) -> int:
    """Applies the source partition up to its last stable offset, or only until the view
    reaches ``until``; returns the applied position, telling ``progress`` of each step.
    Safe beside the background task."""
    view = broker.full_view
    position = await view.applied_position(topic_partition)
    while until is None or position < until:
        if not await apply_partition_once(broker, topic_partition):
            break
        applied = await view.applied_position(topic_partition)
        if progress is not None:
            progress.advance(applied - position)
        position = applied
    return position


async def build_view(broker: ViewHost, topic_name: str) -> None:
    """Applies every partition of the topic's view up to its last stable offset as of now
    (the first read of a view not kept so far waits for this); a build that takes longer
    than BUILD_PROGRESS_INTERVAL_S says how far it is."""
    topic = broker.topics.get(topic_name)
    if topic is None:
        return
    for partition_log in topic.logs:
        topic_partition = partition_log.topic_partition
        transactions = broker.transactions.partition(topic_partition)
        stable = transactions.last_stable_offset(partition_log.high_watermark)
        position = await broker.full_view.applied_position(topic_partition)
        progress = Progress(
            f"building {view_name(topic_name)} partition {topic_partition.partition}",
            max(stable - position, 0), "records", to_log(log), BUILD_PROGRESS_INTERVAL_S,
        )  # fmt: skip
        await catch_up(broker, topic_partition, until=stable, progress=progress)
        progress.finish()


async def purge_tombstones_once(broker: ViewHost) -> None:
    """Drops expired tombstones; readers long-polling those views are woken."""
    view = broker.full_view
    async with view.lock:
        changed = await asyncio.to_thread(view.store.purge_tombstones, broker.clock.expiry_now())
    for topic_partition in changed:
        broker.append_waiters.notify(view_partition(topic_partition))


def view_partition(source: TopicPartition) -> TopicPartition:
    return TopicPartition(view_name(source.topic), source.partition)


def _every_viewed_partition(broker: ViewHost) -> set[TopicPartition]:
    return {
        log.topic_partition
        for topic in broker.topics.by_name.values()
        if broker.full_view.keeps(topic)
        for log in topic.logs
    }


class ViewUpkeep:
    """The work of the background job that keeps every view current (kshim/broker/jobs/
    runs ``apply_pending`` when woken and ``tick`` every TOMBSTONE_PURGE_INTERVAL_S). A
    partition that fails is retried at the next tick, not at once, so a persistent error
    never spins."""

    def __init__(self, broker: ViewHost) -> None:
        self._broker = broker
        self._retry: set[TopicPartition] = set()

    def resume(self) -> None:
        """Has every kept view's partitions looked at: each resumes from its stored position."""
        self._broker.full_view.pending |= _every_viewed_partition(self._broker)

    async def tick(self) -> None:
        """Failed partitions again, and expired tombstones purged. Views are woken by
        appends, by being turned on (broker.py) and by their first read (view.py); no
        tick visits every view, which at 10,000 topics would cost a fifth of a core."""
        view = self._broker.full_view
        view.pending |= self._retry
        self._retry = set()
        try:
            await purge_tombstones_once(self._broker)
        except Exception:
            log.exception("purging full-view tombstones failed; retrying")

    async def apply_pending(self) -> None:
        """A chunk of each partition with something new; one with more left is looked at
        again after the others."""
        view = self._broker.full_view
        pending, view.pending = view.pending, set()
        for topic_partition in sorted(pending):
            try:
                if await apply_partition_once(self._broker, topic_partition):
                    view.notify(topic_partition)  # more may remain: come back after the others
            except Exception:
                log.exception("%s: applying the full view failed; retrying", topic_partition)
                self._retry.add(topic_partition)
