"""The background task that applies retention and DeleteRecords to segment files.

Every ``log.retention.check.interval.ms`` it plans each partition with the
pure ``plan_retention`` and drops whole old segments; the new log start
offset is made durable in LMDB before any file is deleted, so a crash in
between never resurrects deleted offsets. A topic with a full-data view only
drops segments its view has applied entirely (issue 6).
"""

from __future__ import annotations

import asyncio
import logging

from kshim.broker.broker import Broker
from kshim.broker.full_view.naming import has_view
from kshim.storage.partition_log import PartitionLog
from kshim.storage.retention import NO_LIMIT, SegmentSummary, plan_retention

log = logging.getLogger(__name__)


async def enforce_retention_once(broker: Broker) -> int:
    """Runs one pass over every partition; returns how many segments were dropped."""
    dropped = 0
    for topic in list(broker.topics.topics.values()):
        deletes = "delete" in topic.configs["cleanup.policy"].split(",")
        retention_ms = int(topic.configs["retention.ms"]) if deletes else NO_LIMIT
        retention_bytes = int(topic.configs["retention.bytes"]) if deletes else NO_LIMIT
        viewed = has_view(topic)
        for partition_log in list(topic.logs):
            dropped += await _enforce(broker, partition_log, retention_ms, retention_bytes, viewed)
    return dropped


async def _enforce(
    broker: Broker,
    partition_log: PartitionLog,
    retention_ms: int,
    retention_bytes: int,
    viewed: bool,
) -> int:
    segments = partition_log.segment_summaries()
    if viewed:
        applied = await broker.full_view.applied_position(partition_log.topic_partition)
        segments = applied_segments(segments, applied)
    plan = plan_retention(
        segments,
        partition_log.log_start_offset,
        broker.clock(),
        retention_ms,
        retention_bytes,
    )
    if plan.drop_count == 0:
        return 0
    if plan.log_start_offset > partition_log.log_start_offset:
        await asyncio.to_thread(
            broker.metadata.set_log_start_offset,
            partition_log.topic_partition,
            plan.log_start_offset,
        )
    await partition_log.drop_oldest_segments(plan.drop_count, plan.log_start_offset)
    broker.transactions.forget_below(partition_log.topic_partition, partition_log.log_start_offset)
    log.info("%s: dropped %d segments, log start now %d", partition_log.topic_partition,
             plan.drop_count, partition_log.log_start_offset)  # fmt: skip
    return plan.drop_count


def applied_segments(segments: list[SegmentSummary], applied: int) -> list[SegmentSummary]:
    """The segments wholly below ``applied``, then the next one: ``plan_retention`` never
    drops the last segment it is given, so only applied segments may go."""
    done = sum(1 for segment in segments if segment.next_offset <= applied)
    return segments[: done + 1]


async def run_retention(broker: Broker, interval_s: float) -> None:
    """Applies retention forever, every ``interval_s`` seconds; cancel to stop."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await enforce_retention_once(broker)
            broker.expire_idle_producers()
        except Exception:
            log.exception("retention pass failed; retrying next interval")
