"""The gateway's own answers to reads of ``T.full``: Fetch, ListOffsets, OffsetForLeaderEpoch.

They are answered from the index of ``T`` this gateway keeps for the partitions it owns
(index.py) as kshim's broker answers them from its view (kshim/broker/full_view/reader.py):
the same widened one-record batches at ``T``'s offsets, the same log start and high
watermark. A partition this gateway does not own, or is still rebuilding after taking it
over, is answered NOT_LEADER_OR_FOLLOWER: clients ask for metadata again (which names the
owner) and retry, as after a leadership change. A Fetch finding nothing waits, up to its
``max_wait``, for any of its partitions to grow, as Kafka's delayed fetch does. Fetch
sessions (KIP-227) are not kept: every answer has session id 0, so a client sends full
fetches (Kafka's own answer when it has no session to give).
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Sequence
from typing import Protocol, cast

from kshim.broker.full_view.naming import source_name
from kshim.broker.full_view.reader import ViewRead
from kshim.broker.partition_reads import PartitionOffsets
from kshim.client.list_offsets import NO_LEADER_EPOCH
from kshim.gateway.full.requests import FETCH_KEY, LIST_OFFSETS_KEY
from kshim.gateway.full.shapes import (
    EpochPartitionAsked,
    EpochsAsked,
    FetchAsked,
    FetchPartitionAsked,
    OffsetsAsked,
    OffsetsPartitionAsked,
)
from kshim.protocol import codec
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import (
    MAX_VERSION,
    MIN_VERSION,
    FetchedPartition,
    FetchedTopic,
    Part,
    encode_fetch_response,
)
from kshim.protocol.headers import encode_response_header

LATEST, MAX_TIMESTAMP = -1, -3  # ListOffsets' special times (earliest ones are < 0 too)
READY_WAIT_S = 5.0  # a ListOffsets of a view being built waits this long for it
READY_POLL_S = 0.05
NOT_LEADER = ErrorCode.not_leader_or_follower.value
NONE = ErrorCode.none.value


class ViewReads(Protocol):
    """The index of the views this gateway owns (index.py), by source topic ``T``."""

    def owns(self, topic: str, partition: int) -> bool: ...

    def ready(self, topic: str, partition: int) -> bool: ...

    def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    async def read(
        self, topic: str, partition: int, fetch_offset: int, max_bytes: int
    ) -> ViewRead: ...

    async def wait_beyond(
        self, topic: str, partition: int, offset: int, timeout_s: float
    ) -> None: ...

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int | None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first live record at or after ``timestamp``, or of
        the one with the largest timestamp for None."""
        ...


class UnservedVersion(Exception):
    """A version of a request the gateway does not answer itself."""


async def answer(
    api_key: int, version: int, correlation_id: int, request: object, index: ViewReads
) -> bytes:
    """The answer payload (header and body) to a decoded request for views (kio's)."""
    if api_key == FETCH_KEY:
        if not MIN_VERSION <= version <= MAX_VERSION:
            raise UnservedVersion(f"Fetch v{version} of a view")
        fetch = cast(FetchAsked, request)
        asked = [(t.topic, p.partition) for t in fetch.topics for p in t.partitions]
        await _ready(index, asked, codec.milliseconds(fetch.max_wait) / 1000)
        parts = await fetch_answer(version, fetch, index)
        # Every part is bytes here: the batches come from the index, not from files.
        body = b"".join(cast("bytes | memoryview", part) for part in parts)
    elif api_key == LIST_OFFSETS_KEY:
        listing = cast(OffsetsAsked, request)
        asked = [(t.name, p.partition_index) for t in listing.topics for p in t.partitions]
        await _ready(index, asked, READY_WAIT_S)
        offsets = await list_offsets_answer(listing, index)
        body = codec.encode_response(api_key, version, offsets)
    else:
        ends = epoch_end_answer(cast(EpochsAsked, request), index)
        body = codec.encode_response(api_key, version, ends)
    return encode_response_header(correlation_id, codec.is_flexible(api_key, version)) + body


def _owned(index: ViewReads, name: str, partition: int) -> str | None:
    """``T`` when the gateway answers reads of ``name``-``partition`` now, else None."""
    source = source_name(name)
    if source is None or not index.owns(source, partition):
        return None
    try:
        return source if index.ready(source, partition) else None
    except LookupError:
        return None


async def _ready(index: ViewReads, names: Sequence[tuple[str, int]], timeout_s: float) -> None:
    """Waits, up to ``timeout_s``, until the views this gateway owns among ``names`` (view
    topic, partition) are built: a first read waits for the build, as on kshim's broker,
    rather than send its client away."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        building = [
            (name, partition)
            for name, partition in names
            if (source := source_name(name)) is not None
            and index.owns(source, partition)
            and _owned(index, name, partition) is None
        ]
        if not building:
            return
        await asyncio.sleep(READY_POLL_S)


async def fetch_answer(version: int, request: FetchAsked, index: ViewReads) -> list[Part]:
    """A Fetch answer's body parts; waits up to ``max_wait`` when nothing is found."""
    topics = await _fetched(request, index)
    max_wait_s = codec.milliseconds(request.max_wait) / 1000
    if max_wait_s > 0 and not any(p.records for t in topics for p in t.partitions):
        await _any_grows(request, index, max_wait_s)
        topics = await _fetched(request, index)
    return encode_fetch_response(version, topics)


async def _fetched(request: FetchAsked, index: ViewReads) -> list[FetchedTopic]:
    left = request.max_bytes if request.max_bytes > 0 else 1 << 30
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            partition = await _partition(index, topic.topic, wanted, left)
            left = max(left - partition.records_size, 0)
            partitions.append(partition)
        topics.append(FetchedTopic(topic.topic, partitions))
    return topics


async def _partition(
    index: ViewReads, name: str, wanted: FetchPartitionAsked, left: int
) -> FetchedPartition:
    source = _owned(index, name, wanted.partition)
    if source is None:
        return FetchedPartition(wanted.partition, NOT_LEADER, -1, -1, -1, [])
    limit = max(min(wanted.partition_max_bytes, left), 1)
    try:
        read = await index.read(source, wanted.partition, wanted.fetch_offset, limit)
    except LookupError:  # released meanwhile (a rebalance moved it)
        return FetchedPartition(wanted.partition, NOT_LEADER, -1, -1, -1, [])
    offsets = read.offsets
    error = ErrorCode.offset_out_of_range.value if read.out_of_range else NONE
    return FetchedPartition(
        wanted.partition,
        error,
        offsets.high_watermark,
        offsets.last_stable_offset,
        offsets.log_start_offset,
        [],  # a view holds committed records only
        read.batches,
    )


async def _any_grows(request: FetchAsked, index: ViewReads, timeout_s: float) -> None:
    waits = [
        index.wait_beyond(source, wanted.partition, wanted.fetch_offset, timeout_s)
        for topic in request.topics
        for wanted in topic.partitions
        if (source := _owned(index, topic.topic, wanted.partition)) is not None
    ]
    if not waits:
        return
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def list_offsets_answer(request: OffsetsAsked, index: ViewReads) -> dict[str, object]:
    topics = []
    for topic in request.topics:
        partitions = [await _listed(index, topic.name, wanted) for wanted in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def _listed(index: ViewReads, name: str, wanted: OffsetsPartitionAsked) -> dict[str, object]:
    answer: dict[str, object] = {
        "partition_index": wanted.partition_index,
        "leader_epoch": NO_LEADER_EPOCH,
    }
    source = _owned(index, name, wanted.partition_index)
    if source is None:
        return answer | {"error_code": NOT_LEADER, "timestamp": -1, "offset": -1}
    try:
        found = await _offset_at(index, source, wanted.partition_index, wanted.timestamp)
    except LookupError:  # released meanwhile (a rebalance moved it)
        return answer | {"error_code": NOT_LEADER, "timestamp": -1, "offset": -1}
    offset, stamp = found if found is not None else (-1, -1)
    return answer | {"error_code": NONE, "timestamp": stamp, "offset": offset}


async def _offset_at(
    index: ViewReads, source: str, partition: int, asked: datetime.datetime | int
) -> tuple[int, int] | None:
    timestamp = codec.milliseconds(asked)
    offsets = index.offsets(source, partition)
    if timestamp == LATEST:
        return offsets.high_watermark, -1
    if timestamp < 0 and timestamp != MAX_TIMESTAMP:  # earliest, earliest local (KIP-405)
        return offsets.log_start_offset, -1
    wanted_at = None if timestamp == MAX_TIMESTAMP else timestamp
    return await index.offset_for_timestamp(source, partition, wanted_at)


def epoch_end_answer(request: EpochsAsked, index: ViewReads) -> dict[str, object]:
    """Each partition's end (the view's high watermark), as of the epoch asked: a view has
    no epochs of its own."""
    topics = []
    for topic in request.topics:
        partitions: Sequence[dict[str, object]] = [
            _epoch_end(index, topic.topic, wanted) for wanted in topic.partitions
        ]
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _epoch_end(index: ViewReads, name: str, wanted: EpochPartitionAsked) -> dict[str, object]:
    source = _owned(index, name, wanted.partition)
    if source is None:
        return {"error_code": NOT_LEADER, "partition": wanted.partition,
                "leader_epoch": NO_LEADER_EPOCH, "end_offset": -1}  # fmt: skip
    try:
        end = index.offsets(source, wanted.partition).high_watermark
    except LookupError:  # released meanwhile
        return {"error_code": NOT_LEADER, "partition": wanted.partition,
                "leader_epoch": NO_LEADER_EPOCH, "end_offset": -1}  # fmt: skip
    return {"error_code": NONE, "partition": wanted.partition,
            "leader_epoch": wanted.leader_epoch, "end_offset": end}  # fmt: skip
