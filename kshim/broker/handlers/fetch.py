"""Fetch (key 1): stored batch bytes per partition, long-polled until data arrives.

The request waits up to max_wait_ms until min_bytes are available, woken by
appends (never by polling). Records are sent exactly as stored, uncopied:
the response is encoded by hand (protocol/fetch_response.py) into parts, and
disk ranges go out with sendfile. Fetch sessions are declined (session id
0), which every client accepts.
"""

from __future__ import annotations

import time
from typing import Any

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.full_view.naming import source_of
from kshim.broker.full_view.reader import read_view
from kshim.protocol.codec import milliseconds
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import (
    FetchedPartition,
    FetchedTopic,
    Part,
    encode_fetch_response,
)
from kshim.storage.interface import FileRegion, OffsetOutOfRange, TopicPartition

READ_COMMITTED = 1


async def handle(request: Any, context: RequestContext) -> list[Part]:
    broker = context.broker
    wanted = [
        (TopicPartition(topic.topic, partition.partition), partition)
        for topic in request.topics
        for partition in topic.partitions
    ]
    deadline = time.monotonic() + max(milliseconds(request.max_wait), 0) / 1000
    while True:
        partitions, total_bytes, failed = await _read_all(broker, wanted, request)
        remaining = deadline - time.monotonic()
        if total_bytes >= request.min_bytes or failed or remaining <= 0 or not wanted:
            break
        _release(partitions)
        await broker.append_waiters.wait_any([tp for tp, _ in wanted], remaining)
    return encode_fetch_response(context.version, _group_by_topic(partitions))


async def _read_all(
    broker: Broker, wanted: list[tuple[TopicPartition, Any]], request: Any
) -> tuple[list[tuple[str, FetchedPartition]], int, bool]:
    """Reads every requested partition; returns (responses, bytes, any partition failed)."""
    budget = request.max_bytes
    total = 0
    failed = False
    responses = []
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    for topic_partition, partition in wanted:
        response = await _read_partition(broker, topic_partition, partition, budget, read_committed)
        size = response.records_size
        total += size
        budget = max(budget - size, 0)
        failed = failed or response.error_code != ErrorCode.none
        responses.append((topic_partition.topic, response))
    return responses, total, failed


async def _read_partition(
    broker: Broker,
    topic_partition: TopicPartition,
    partition: Any,
    budget: int,
    read_committed: bool,
) -> FetchedPartition:
    log = broker.partition_log(topic_partition)
    response = FetchedPartition(
        partition_index=topic_partition.partition,
        error_code=ErrorCode.none,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=[] if read_committed else None,
    )
    if log is None:
        return await _read_view_partition(broker, topic_partition, partition, budget, response)
    high_watermark = log.high_watermark
    transactions = broker.transactions.partition(topic_partition)
    last_stable_offset = transactions.last_stable_offset(high_watermark)
    response.high_watermark = high_watermark
    response.last_stable_offset = last_stable_offset
    response.log_start_offset = log.log_start_offset
    # read_committed stops at the last stable offset (research notes §5.2).
    upper_offset = last_stable_offset if read_committed else high_watermark
    # KIP-74: a partition gets at least one batch even past partition_max_bytes,
    # but nothing once the response as a whole is full.
    if budget <= 0:
        return response
    max_bytes = min(partition.partition_max_bytes, budget)
    try:
        result = await log.read(partition.fetch_offset, max_bytes, upper_offset)
    except OffsetOutOfRange:
        response.error_code = ErrorCode.offset_out_of_range
        return response
    response.records = result.chunks
    if read_committed:
        response.aborted_transactions = transactions.aborted_in_range(
            partition.fetch_offset, result.end_offset
        )
    return response


async def _read_view_partition(
    broker: Broker,
    topic_partition: TopicPartition,
    partition: Any,
    budget: int,
    response: FetchedPartition,
) -> FetchedPartition:
    """Fetch from ``T.full``: it holds committed data only, so both isolation levels
    read the same batches, up to its high watermark (its last stable offset too)."""
    source = source_of(broker.topics.topics, topic_partition.topic)
    if source is None or not 0 <= topic_partition.partition < len(source.logs):
        response.error_code = ErrorCode.unknown_topic_or_partition
        return response
    source_partition = TopicPartition(source.record.name, topic_partition.partition)
    max_bytes = min(partition.partition_max_bytes, budget)
    result = await read_view(broker, source_partition, partition.fetch_offset, max_bytes)
    response.high_watermark = result.offsets.high_watermark
    response.last_stable_offset = result.offsets.high_watermark
    response.log_start_offset = result.offsets.log_start_offset
    if result.out_of_range:
        response.error_code = ErrorCode.offset_out_of_range
    elif budget > 0:
        response.records = result.batches
    return response


def _release(partitions: list[tuple[str, FetchedPartition]]) -> None:
    """Closes file regions of a read that will not be sent (the long poll goes on)."""
    for _, partition in partitions:
        for chunk in partition.records:
            if isinstance(chunk, FileRegion):
                chunk.close()


def _group_by_topic(partitions: list[tuple[str, FetchedPartition]]) -> list[FetchedTopic]:
    topics: dict[str, list[FetchedPartition]] = {}
    for topic, response in partitions:
        topics.setdefault(topic, []).append(response)
    return [FetchedTopic(topic, responses) for topic, responses in topics.items()]
