"""Fetch (key 1): stored batch bytes per partition, long-polled until data arrives, in
incremental fetch sessions (KIP-227) when the client opens one.

The request's session fields pick its context (broker/fetch_sessions.py): the partitions
to read (the request's, or for an incremental fetch all of its session's) and which of
their answers are sent (for an incremental fetch, those with records, an error or offsets
the client has not been told). As in Kafka's KafkaApis.handleFetchRequest, the session is
updated first; then each partition of the context is authorised (where ACLs apply, by the
access rule in access.py: READ on its topic) and resolved, and those refused or unknown
are answered with their error after the others, without ending the wait.

The request waits up to max_wait_ms until min_bytes are available, woken by appends to any
partition it reads (never by polling); a read that fails (offset out of range) answers at
once. Records are sent exactly as stored, uncopied: the response is encoded by hand
(protocol/fetch_response.py) into parts, and disk ranges go out with sendfile. The session
keeps offsets only: nothing here decodes a record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence

from kshim.api.context import RequestContext
from kshim.api.records.services import FetchServices
from kshim.broker.fetch_sessions import INVALID_SESSION_ID, Answered, FetchContext, Wanted
from kshim.broker.partition_reads import PartitionOffsets, ReadablePartition
from kshim.broker.topic_resolver import TopicResolver
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
NO_ERROR = ErrorCode.none
NO_OFFSET = -1  # high watermark, last stable offset, log start: Kafka's -1 for "none"

# A partition to read: its parameters, and its resolved partition (None: resolve again).
Target = tuple[TopicPartition, FetchPartition, ReadablePartition | None]


def handle(request: FetchRequest, context: RequestContext[FetchServices]) -> Awaitable[list[Part]]:
    """Answers ``request`` in its fetch session's context. A plain function returning the
    coroutine that reads (``answer``), so the access rule (access.py) can take the same
    steps with the partitions it refuses set apart, and this path adds no frame."""
    session = open_session(request, context)
    if session.error_code:  # a session error: no partition is read
        return _ready(session_error(context, session.error_code))
    targets, erroneous = resolve(context, session.wanted)
    return answer(request, context, session, targets, erroneous)


def open_session(request: FetchRequest, context: RequestContext[FetchServices]) -> FetchContext:
    """The request's fetch session, updated by it: the partitions it reads."""
    return context.broker.fetch_sessions.begin(
        request.session_id,
        request.session_epoch,
        request.replica_id >= 0,  # a follower's session is privileged
        request.topics,
        request.forgotten_topics_data,
    )


def session_error(context: RequestContext[FetchServices], error_code: ErrorCode) -> list[Part]:
    """The answer to a request whose session failed: no partition, ``error_code``."""
    return encode_fetch_response(context.version, (), error_code, INVALID_SESSION_ID)


async def _ready(parts: list[Part]) -> list[Part]:
    return parts


async def answer(
    request: FetchRequest,
    context: RequestContext[FetchServices],
    session: FetchContext,
    targets: list[Target],
    erroneous: Answered,
) -> list[Part]:
    """Reads ``targets``, long-polling, and answers them, then the partitions ``erroneous``
    answers, in the context of ``session``."""
    broker = context.broker
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    while True:
        answers, counts, total_bytes, failed = await _read_all(targets, request)
        remaining = deadline - time.monotonic()
        if total_bytes >= request.min_bytes or failed or remaining <= 0 or not targets:
            break
        _release(answers)
        await broker.append_waiters.wait_any([key for key, _, _ in targets], remaining)
        # Resolved again after the wait: a topic deleted meanwhile answers at once.
        targets = [(key, wanted, _resolved(broker.resolver, key)) for key, wanted, _ in targets]
    sent = session.answer(answers + erroneous if erroneous else answers)
    if sent.error_code:
        _release(answers)
        return encode_fetch_response(context.version, (), sent.error_code, sent.session_id)
    for (topic_partition, _), (size, moved) in zip(answers, counts, strict=True):
        broker.traffic.fetched(topic_partition.topic, size, moved)
    topics = _group_by_topic(sent.partitions)
    return encode_fetch_response(context.version, topics, ErrorCode.none, sent.session_id)


def resolve(
    context: RequestContext[FetchServices], wanted: Wanted
) -> tuple[list[Target], Answered]:
    """The partitions to read, and the answers of those unknown (Kafka's ``interesting``
    and ``erroneous``). A name nobody reads (``T.delay``) is logged with its reason, which
    Fetch has no field to tell the client (refusal_log.py)."""
    readable_partition = context.broker.resolver.readable_partition
    refusals, client_id = context.broker.refusals, context.header.client_id
    targets: list[Target] = []
    erroneous: Answered = []
    for key, partition in wanted:
        try:
            resolved = readable_partition(key)
        except TopicError as refusal:  # a name nobody reads
            error = ErrorCode(refusal.code)
            refusals.refused("Fetch", key.topic, client_id, error, str(refusal))
        else:
            if resolved is not None:
                targets.append((key, partition, resolved))
                continue
            error = ErrorCode.unknown_topic_or_partition
        erroneous.append((key, error_answer(key.partition, error)))
    return targets, erroneous


def _resolved(resolver: TopicResolver, topic_partition: TopicPartition) -> ReadablePartition | None:
    """The partition now, or None where it can no longer be read."""
    try:
        return resolver.readable_partition(topic_partition)
    except TopicError:
        return None


def error_answer(partition_index: int, error: ErrorCode) -> FetchedPartition:
    """Kafka's FetchResponse.partitionResponse for an error: no offsets, no records, an
    empty aborted list whatever the isolation level."""
    return FetchedPartition(
        partition_index=partition_index,
        error_code=error,
        high_watermark=NO_OFFSET,
        last_stable_offset=NO_OFFSET,
        log_start_offset=NO_OFFSET,
        aborted_transactions=[],
    )


def _read_failed(partition_index: int, error: ErrorCode) -> FetchedPartition:
    """Kafka's answer for a read that failed (ReplicaManager.readFromLocalLog's error
    result, as KafkaApis sends it): no offsets, no records, and a null aborted list
    whatever the isolation level. Consumers reset their position with ListOffsets
    (auto.offset.reset), never from these fields: librdkafka, kafka-python, aiokafka and
    the Java client alike. A fetch session records the -1s as told, so the partition's
    offsets are sent again once a read succeeds (FetchSession.CachedPartition)."""
    return FetchedPartition(partition_index, error, NO_OFFSET, NO_OFFSET, NO_OFFSET, None)


async def _read_all(
    targets: list[Target], request: FetchRequest
) -> tuple[Answered, list[tuple[int, int]], int, bool]:
    """Reads every target in order; returns (answers, each one's bytes and the offsets it
    moves its consumer on, bytes in all, any read failed)."""
    budget = request.max_bytes
    total = 0
    failed = False
    answers: Answered = []
    counts = []
    read_committed = request.isolation_level == READ_COMMITTED
    for topic_partition, wanted, partition in targets:
        answer, moved = await _read_partition(
            topic_partition, wanted, partition, budget, read_committed
        )
        size = answer.records_size
        counts.append((size, moved))
        total += size
        budget = max(budget - size, 0)
        failed = failed or answer.error_code != NO_ERROR
        answers.append((topic_partition, answer))
    return answers, counts, total, failed


async def _read_partition(
    topic_partition: TopicPartition,
    wanted: FetchPartition,
    partition: ReadablePartition | None,
    budget: int,
    read_committed: bool,
) -> tuple[FetchedPartition, int]:
    """The partition's answer, and how many offsets it moves the consumer on (records,
    transaction markers among them; 0 where the reader does not say)."""
    index = topic_partition.partition
    if partition is None:  # gone since the request came
        return error_answer(index, ErrorCode.unknown_topic_or_partition), 0
    # KIP-74: a partition gets at least one batch even past partition_max_bytes,
    # but nothing once the response as a whole is full.
    if budget <= 0:
        return _answer(index, NO_ERROR, await partition.offsets(), read_committed), 0
    max_bytes = min(wanted.partition_max_bytes, budget)
    read = await partition.read(wanted.fetch_offset, max_bytes, read_committed)
    if read.out_of_range:
        return _read_failed(index, ErrorCode.offset_out_of_range), 0
    if read.error_code:  # the stored bytes cannot be served (partition_reads.py)
        return _read_failed(index, ErrorCode(read.error_code)), 0
    answer = _answer(index, NO_ERROR, read.offsets, read_committed, read.chunks)
    if read_committed:
        answer.aborted_transactions = read.aborted_transactions
    return answer, max(read.end_offset - wanted.fetch_offset, 0)


def _answer(
    index: int,
    error: ErrorCode,
    offsets: PartitionOffsets,
    read_committed: bool,
    records: Sequence[Part] = (),
) -> FetchedPartition:
    """A partition's answer with its offsets; an empty aborted list for read_committed,
    null otherwise (KafkaApis: the read's abortedTransactions or null)."""
    return FetchedPartition(
        index,
        error,
        offsets.high_watermark,
        offsets.last_stable_offset,
        offsets.log_start_offset,
        [] if read_committed else None,
        records,
    )


def _release(answers: Answered) -> None:
    """Closes file regions of a read that will not be sent (the long poll goes on)."""
    for _, answer in answers:
        for chunk in answer.records:
            if isinstance(chunk, FileRegion):
                chunk.close()


def _group_by_topic(answers: Answered) -> list[FetchedTopic]:
    """Consecutive partitions of a topic under one entry, in the order given (Kafka's
    FetchResponse.toMessage keeps the order, so a topic may come back further on)."""
    topics: list[FetchedTopic] = []
    for topic_partition, answer in answers:
        if topics and topics[-1].name == topic_partition.topic:
            topics[-1].partitions.append(answer)
        else:
            topics.append(FetchedTopic(topic_partition.topic, [answer]))
    return topics
