"""Fetch (key 1): stored batch bytes per partition, long-polled until data arrives.

The request waits up to max_wait_ms until min_bytes are available, woken by
appends (never by polling). Records are sent exactly as stored. Fetch
sessions are declined (session id 0), which every client accepts.
"""

from __future__ import annotations

import time
from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.state import Broker
from kshim.protocol.codec import milliseconds
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import OffsetOutOfRange, TopicPartition

READ_COMMITTED = 1


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
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
        await broker.append_waiters.wait_any([tp for tp, _ in wanted], remaining)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "session_id": 0,
        "responses": _group_by_topic(partitions),
    }


async def _read_all(
    broker: Broker, wanted: list[tuple[TopicPartition, Any]], request: Any
) -> tuple[list[tuple[str, dict[str, Any]]], int, bool]:
    """Reads every requested partition; returns (responses, bytes, any partition failed)."""
    budget = request.max_bytes
    total = 0
    failed = False
    responses = []
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    for topic_partition, partition in wanted:
        response = await _read_partition(broker, topic_partition, partition, budget, read_committed)
        size = len(response["records"])
        total += size
        budget = max(budget - size, 0)
        failed = failed or response["error_code"] != ErrorCode.none
        responses.append((topic_partition.topic, response))
    return responses, total, failed


async def _read_partition(
    broker: Broker,
    topic_partition: TopicPartition,
    partition: Any,
    budget: int,
    read_committed: bool,
) -> dict[str, Any]:
    log = broker.partition_log(topic_partition)
    response: dict[str, Any] = {
        "partition_index": topic_partition.partition,
        "error_code": ErrorCode.none,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [] if read_committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    if log is None:
        response["error_code"] = ErrorCode.unknown_topic_or_partition
        return response
    high_watermark = log.high_watermark
    response.update(
        high_watermark=high_watermark,
        last_stable_offset=high_watermark,
        log_start_offset=log.log_start_offset,
    )
    # KIP-74: a partition gets at least one batch even past the request's max_bytes,
    # but only while the response is still empty of data.
    max_bytes = min(partition.partition_max_bytes, budget) if budget > 0 else 0
    if max_bytes <= 0 and budget <= 0:
        return response
    try:
        result = await log.read(partition.fetch_offset, max_bytes, high_watermark)
    except OffsetOutOfRange:
        response["error_code"] = ErrorCode.offset_out_of_range
        return response
    response["records"] = b"".join(result.chunks)
    return response


def _group_by_topic(partitions: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, response in partitions:
        topics.setdefault(topic, []).append(response)
    return [{"topic": topic, "partitions": responses} for topic, responses in topics.items()]
