"""The log cleaner: compaction of every topic with ``cleanup.policy=compact`` (Kafka's LogCleaner).

A background job (kshim/broker/jobs/) looks at each compacted partition in turn and has its
log run a pass when one is due (storage/compaction.py says when, storage/log/cleaner.py what
goes; the log's store does the file work in worker threads). A round that compacted
something is followed by another at once, as Kafka's cleaner threads do; otherwise the next
waits ``log.cleaner.backoff.ms`` (none runs when ``log.cleaner.enable`` is false). Per
partition the broker supplies what the log cannot know: where the last pass stopped
(durable in LMDB, Kafka's cleaner-offset-checkpoint), the last stable offset (an open
transaction's records are never cleaned), how far the topic's full-data view has applied
(a record the view has not seen is never removed: the view would miss a tombstone), the
aborted transactions and the last batch of each idempotent producer. ``compact_partition``
is also what tools and tests call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from kshim.broker.broker import Broker
from kshim.broker.compacted_records import compacts
from kshim.broker.topic_resolver import DeletablePartition
from kshim.storage.compaction import CompactionPolicy, CompactionRequest, CompactionResult
from kshim.storage.log.offset_map import capacity_for

log = logging.getLogger(__name__)


def compaction_policy(configs: Mapping[str, str]) -> CompactionPolicy:
    return CompactionPolicy(
        min_cleanable_ratio=float(configs["min.cleanable.dirty.ratio"]),
        min_lag_ms=int(configs["min.compaction.lag.ms"]),
        max_lag_ms=int(configs["max.compaction.lag.ms"]),
        delete_retention_ms=int(configs["delete.retention.ms"]),
    )


async def compact_partition(
    broker: Broker, partition: DeletablePartition, force: bool = False
) -> CompactionResult | None:
    """Runs one pass over the partition when one is due (any time with ``force``) and
    records where it stopped; returns what it did, or None when no pass was due.
    Event-loop thread only."""
    partition_log = partition.log
    topic_partition = partition_log.topic_partition
    checkpoint = await asyncio.to_thread(broker.metadata.cleaner_checkpoint, topic_partition)
    transactions = broker.transactions.partition(topic_partition)
    stable = transactions.last_stable_offset(partition_log.high_watermark)
    limit = await partition.log_start_limit()
    producers = broker.partitions.producer_states.get(topic_partition)
    last_batches = frozenset(
        entry.batches[-1].last_offset
        for entry in ([] if producers is None else producers.producers.values())
        if entry.batches
    )
    request = CompactionRequest(
        policy=compaction_policy(partition.topic.configs),
        first_dirty_offset=partition_log.log_start_offset if checkpoint is None else checkpoint,
        stable_offset=stable if limit is None else min(stable, limit),
        now_ms=broker.clock.expiry_now(),  # tombstones and lags: deletion by age
        aborted=list(transactions.aborted),
        producer_last_offsets=last_batches,
        offset_map_capacity=capacity_for(broker.config.get_int("log.cleaner.dedupe.buffer.size")),
        force=force,
    )
    result = await partition_log.compact(request)
    if result is None:
        return None
    await asyncio.to_thread(
        broker.metadata.set_cleaner_checkpoint, topic_partition, result.first_dirty_offset
    )
    log.info("%s: compacted %d segments into %d, %d bytes into %d; %d records removed, "
             "%d kept; clean up to offset %d", topic_partition, result.replaced_segments,
             result.new_segments, result.read_bytes, result.written_bytes,
             result.removed_records, result.kept_records,
             result.first_dirty_offset)  # fmt: skip
    return result


async def clean_once(broker: Broker) -> int:
    """One round over every compacted partition; returns how many were compacted."""
    compacted = 0
    for partition in broker.resolver.deletable_partitions():
        if partition.log.topic_partition.topic not in broker.topics.by_name:
            continue  # deleted since the round began
        if compacts(partition.topic.configs) and await compact_partition(broker, partition):
            compacted += 1
    return compacted
