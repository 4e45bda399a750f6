"""Moving a partition's log start forward: retention's background pass and DeleteRecords.

Every ``log.retention.check.interval.ms`` a background job plans each partition with
the pure ``plan_retention`` and drops whole old segments; DeleteRecords moves
the log start to an offset and leaves whole segments to the next pass. Both
go through ``advance_log_start``, which makes the new log start durable in
LMDB before any file is deleted. A topic with a full-data view keeps what its
view has not applied (the topic resolver says how far: ``DeletablePartition``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from kshim.broker.broker import Broker
from kshim.broker.full_view.applier import ViewHost, catch_up
from kshim.broker.topic_resolver import DeletablePartition
from kshim.storage.interface import OffsetOutOfRange, PartitionLog
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.retention import NO_LIMIT, SegmentSummary, plan_retention

log = logging.getLogger(__name__)


class LogStartHost(ViewHost, Protocol):
    """What moving a log start needs of the broker (kshim.broker.broker.Broker): the
    metadata it is made durable in, the transactions it forgets below it, and the view
    it waits for (ViewHost)."""

    metadata: MetadataStore


async def advance_log_start(
    broker: LogStartHost, partition_log: PartitionLog, log_start: int, drop_segments: int = 0
) -> None:
    """Moves the partition's log start up to ``log_start`` (never back) and deletes its
    ``drop_segments`` oldest segments (retention; DeleteRecords drops none), then forgets
    the aborted transactions left without records. Without segments to drop, raises
    OffsetOutOfRange when ``log_start`` is past the high watermark, having written nothing.
    Event-loop thread only."""
    topic_partition = partition_log.topic_partition
    if drop_segments == 0:
        if log_start <= partition_log.log_start_offset:
            return
        if log_start > partition_log.high_watermark:  # refused before anything is written
            raise OffsetOutOfRange(f"{log_start} beyond high watermark of {topic_partition}")
    if log_start > partition_log.log_start_offset:
        # Ordering rule, for retention and DeleteRecords alike: the new log start is durable
        # in LMDB before any file is deleted (and before a reader sees it), so a crash in
        # between reopens the log at the new start and never resurrects deleted offsets.
        await asyncio.to_thread(broker.metadata.set_log_start_offset, topic_partition, log_start)
    if drop_segments > 0:
        await partition_log.drop_oldest_segments(drop_segments, log_start)
    else:
        partition_log.advance_log_start_offset(log_start)
    broker.transactions.partition_states.forget_below(
        topic_partition, partition_log.log_start_offset
    )


async def delete_records_before(
    broker: LogStartHost, partition: DeletablePartition, before: int
) -> None:
    """DeleteRecords: moves the log start up to ``before`` (at most the high watermark).
    A topic with a full-data view first has it apply up to ``before``, so only an open
    transaction holds the log start back (it then stops at the view's applied position)."""
    limit = await partition.log_start_limit()
    if limit is not None and limit < before:
        limit = await catch_up(broker, partition.log.topic_partition, until=before)
    await advance_log_start(broker, partition.log, before if limit is None else min(before, limit))


async def enforce_retention_once(broker: Broker) -> int:
    """Runs one pass over every partition; returns how many segments were dropped."""
    dropped = 0
    for partition in broker.resolver.deletable_partitions():
        dropped += await _enforce(broker, partition)
    return dropped


async def _enforce(broker: Broker, partition: DeletablePartition) -> int:
    configs, partition_log = partition.topic.configs, partition.log
    deletes = "delete" in configs["cleanup.policy"].split(",")
    retention_ms = int(configs["retention.ms"]) if deletes else NO_LIMIT
    retention_bytes = int(configs["retention.bytes"]) if deletes else NO_LIMIT
    segments = partition_log.segment_summaries()
    limit = await partition.log_start_limit()
    if limit is not None:
        segments = applied_segments(segments, limit)
    # Segments' newest timestamps against the clock deletions by age go by: never ahead of
    # this process's start plus the monotonic time since, so a wall clock stepped forward
    # deletes nothing early; one stepped back deletes nothing kept (kshim/broker/clock.py).
    now_ms = broker.clock.expiry_now()
    plan = plan_retention(
        segments, partition_log.log_start_offset, now_ms, retention_ms, retention_bytes
    )
    if plan.drop_count == 0:
        return 0
    await advance_log_start(broker, partition_log, plan.log_start_offset, plan.drop_count)
    log.info("%s: dropped %d segments, log start now %d", partition_log.topic_partition,
             plan.drop_count, partition_log.log_start_offset)  # fmt: skip
    return plan.drop_count


def applied_segments(segments: list[SegmentSummary], applied: int) -> list[SegmentSummary]:
    """The segments wholly below ``applied``, then the next one: ``plan_retention`` never
    drops the last segment it is given, so only applied segments may go."""
    done = sum(1 for segment in segments if segment.next_offset <= applied)
    return segments[: done + 1]


async def retention_pass(broker: Broker) -> None:
    """One pass of the background job (every ``log.retention.check.interval.ms``): every
    partition's retention, then idle producers' idempotence state."""
    await enforce_retention_once(broker)
    broker.expire_idle_producers()
