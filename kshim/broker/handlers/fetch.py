"""Fetch (key 1): stored batch bytes per partition, long-polled until data arrives.

The request waits up to max_wait_ms until min_bytes are available, woken by
appends (never by polling). Records are sent exactly as stored, uncopied:
the response is encoded by hand (protocol/fetch_response.py) into parts, and
disk ranges go out with sendfile. Fetch sessions are declined (session id
0), which every client accepts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.broker.partition_reads import PartitionOffsets
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import (
    FetchedPartition,
    FetchedTopic,
    Part,
    encode_fetch_response,
)
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest
from kshim.storage.interface import FileRegion, TopicPartition

READ_COMMITTED = 1


async def handle(
    request: FetchRequest, context: RequestContext, refused: Sequence[FetchedTopic] = ()
) -> list[Part]:
    """Reads every partition of ``request`` and answers for them, and for the partitions
    ``refused`` before the request got here (access/records.py: those the client may not
    read), answered as given; only the partitions read are waited on."""
    broker = context.broker
    wanted = [
        (TopicPartition(topic.topic, partition.partition), partition)
        for topic in request.topics
        for partition in topic.partitions
    ]
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    while True:
        partitions, counts, total_bytes, failed = await _read_all(broker, wanted, request)
        remaining = deadline - time.monotonic()
        if total_bytes >= request.min_bytes or failed or remaining <= 0 or not wanted:
            break
        _release(partitions)
        await broker.append_waiters.wait_any([tp for tp, _ in wanted], remaining)
    for (topic, _), (size, moved) in zip(partitions, counts, strict=True):
        broker.traffic.fetched(topic, size, moved)
    topics = _group_by_topic(partitions)
    topics.extend(refused)
    return encode_fetch_response(context.version, topics)


async def _read_all(
    broker: Broker, wanted: list[tuple[TopicPartition, FetchPartition]], request: FetchRequest
) -> tuple[list[tuple[str, FetchedPartition]], list[tuple[int, int]], int, bool]:
    """Reads every requested partition; returns (responses, each one's bytes and the
    offsets it moves its consumer on, bytes in all, any partition failed)."""
    budget = request.max_bytes
    total = 0
    failed = False
    responses = []
    counts = []
    read_committed = request.isolation_level == READ_COMMITTED
    for topic_partition, partition in wanted:
        response, moved = await _read_partition(
            broker, topic_partition, partition, budget, read_committed
        )
        size = response.records_size
        counts.append((size, moved))
        total += size
        budget = max(budget - size, 0)
        failed = failed or response.error_code != ErrorCode.none
        responses.append((topic_partition.topic, response))
    return responses, counts, total, failed


async def _read_partition(
    broker: Broker,
    topic_partition: TopicPartition,
    wanted: FetchPartition,
    budget: int,
    read_committed: bool,
) -> tuple[FetchedPartition, int]:
    """The partition's answer, and how many offsets it moves the consumer on (records,
    transaction markers among them; 0 where the reader does not say)."""
    response = FetchedPartition(
        partition_index=topic_partition.partition,
        error_code=ErrorCode.none,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=[] if read_committed else None,
    )
    try:
        partition = broker.resolver.readable_partition(topic_partition)
    except TopicError as error:  # a name nobody reads
        response.error_code = ErrorCode(error.code)
        return response, 0
    if partition is None:
        response.error_code = ErrorCode.unknown_topic_or_partition
        return response, 0
    # KIP-74: a partition gets at least one batch even past partition_max_bytes,
    # but nothing once the response as a whole is full.
    if budget <= 0:
        _set_offsets(response, await partition.offsets())
        return response, 0
    max_bytes = min(wanted.partition_max_bytes, budget)
    read = await partition.read(wanted.fetch_offset, max_bytes, read_committed)
    _set_offsets(response, read.offsets)
    if read.out_of_range:
        response.error_code = ErrorCode.offset_out_of_range
        return response, 0
    response.records = read.chunks
    if read_committed:
        response.aborted_transactions = read.aborted_transactions
    return response, max(read.end_offset - wanted.fetch_offset, 0)


def _set_offsets(response: FetchedPartition, offsets: PartitionOffsets) -> None:
    response.high_watermark = offsets.high_watermark
    response.last_stable_offset = offsets.last_stable_offset
    response.log_start_offset = offsets.log_start_offset


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
