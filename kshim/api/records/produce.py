"""Produce (key 0): validate each partition's batch, assign offsets, append raw bytes.

Batches are never decoded here: the header and CRC-32C are checked, offsets
are stamped into the header, and the bytes are stored as received. (Only a
partition whose records follow rules of their own, a delay companion's or a
compacted topic's, has its records read: the resolver's ``WritablePartition.check``.) A
response (acks 1 or -1) is sent only once every appended batch is fsynced;
acks=0 gets none. One bad partition never fails the others. A refusal's reason goes in
the answer's error_message (v8+) and, once per kind and topic a minute, in the broker's
log (refusal_log.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kshim.api.context import RequestContext
from kshim.broker.broker import Broker
from kshim.broker.producer_state import Duplicate
from kshim.broker.topic_resolver import WritablePartition
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import Part
from kshim.protocol.produce_request import PartitionData, ProduceRequest
from kshim.protocol.produce_response import (
    NO_TIMESTAMP,
    PartitionAnswer,
    TopicAnswers,
    encode_produce_response,
)
from kshim.protocol.record_batch import (
    BatchHeader,
    InvalidBatch,
    iter_batches,
    set_log_append_time,
    validate_produced,
)
from kshim.storage.interface import LogFailed, PartitionLog, TopicPartition


@dataclass(slots=True)
class PartitionResult:
    index: int
    error_code: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time: int = NO_TIMESTAMP
    log_start_offset: int = -1
    error_message: str | None = None
    durable_offset: int = -1  # the last offset that must be on disk before answering
    log: PartitionLog | None = field(default=None, repr=False)

    def answer(self) -> PartitionAnswer:
        return PartitionAnswer(
            self.index,
            self.error_code,
            self.base_offset,
            self.log_append_time,
            self.log_start_offset,
            self.error_message,
        )


# Each topic's partitions' results, in the order of the request.
Appended = list[tuple[str, list[PartitionResult]]]


async def handle(request: ProduceRequest, context: RequestContext) -> list[Part] | None:
    """Appends every partition of ``request`` and answers for them, once every appended
    batch is durable; None for acks=0."""
    appended = append_all(request, context)
    if request.acks == 0:
        return None
    await wait_durable(appended)
    return encode(context, answers(appended))


def append_all(request: ProduceRequest, context: RequestContext) -> Appended:
    """Appends each partition's batch of ``request``, or says why not."""
    return [
        (topic.name, [_append(context, topic.name, data, request) for data in topic.partition_data])
        for topic in request.topic_data
    ]


def answers(appended: Appended) -> list[TopicAnswers]:
    """Each partition's answer, by topic in the order appended."""
    return [(name, [result.answer() for result in partitions]) for name, partitions in appended]


def encode(context: RequestContext, topics: list[TopicAnswers]) -> list[Part]:
    """The response's body, answering ``topics`` in their order."""
    return [encode_produce_response(context.header.api_version, topics)]


def _append(
    context: RequestContext, topic_name: str, data: PartitionData, request: ProduceRequest
) -> PartitionResult:
    """Appends one partition's batch, or answers why not (the reason logged too)."""
    result = _append_checked(context.broker, topic_name, data, request)
    # A failed log is the broker's own failure, logged where the storage fails; the rest
    # with a message are the client's batch or topic refused, which librdkafka shows by
    # the code alone (refusal_log.py).
    if result.error_message is not None and result.error_code != ErrorCode.kafka_storage_error:
        client_id = context.header.client_id
        context.broker.refusals.refused(
            "Produce", topic_name, client_id, result.error_code, result.error_message
        )
    return result


def _append_checked(
    broker: Broker, topic_name: str, data: PartitionData, request: ProduceRequest
) -> PartitionResult:
    result = PartitionResult(data.index)
    topic_partition = TopicPartition(topic_name, data.index)
    try:
        writable = _writable(broker, topic_partition)
        log, configs = writable.log, writable.topic.configs
        result.log_start_offset = log.log_start_offset
        records, header = _validate(data.records, int(configs["max.message.bytes"]))
        now_ms = broker.clock()
        _check_timestamps(header, configs, now_ms)
        if writable.check is not None:
            _check_records(writable.check, records, now_ms)
        if header.is_transactional:
            _check_transaction(broker, request.transactional_id, header, topic_partition)
    except _Refused as refused:
        result.error_code, result.error_message = refused.code, refused.message
        return result
    # Plain producers (no producer id) have no sequence to check and nothing to remember.
    verdict = (
        broker.producer_state(topic_partition).check(header) if header.has_producer_id else None
    )
    if isinstance(verdict, Duplicate):
        result.base_offset = verdict.base_offset
        result.durable_offset = verdict.base_offset + header.last_offset_delta
        result.log = log
        return result
    if verdict is not None:
        result.error_code = verdict
        return result
    batch: bytes | bytearray | memoryview = records
    if configs["message.timestamp.type"] == "LogAppendTime":
        result.log_append_time = broker.clock()
        batch = bytearray(records)  # the CRC changes too
        set_log_append_time(batch, result.log_append_time)
    try:
        result.base_offset = log.append(batch, header)
    except LogFailed as error:
        result.error_code, result.error_message = ErrorCode.kafka_storage_error, str(error)
        return result
    if header.has_producer_id:
        broker.producer_state(topic_partition).record(header, result.base_offset)
    if header.is_transactional:
        broker.transactions.partition(topic_partition).on_append(header, result.base_offset)
    result.durable_offset = result.base_offset + header.last_offset_delta
    result.log = log
    broker.traffic.produced(topic_name, header.records_count, header.size)
    return result


class _Refused(Exception):
    """A partition refused before its batch is appended: the answer's code and message."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _writable(broker: Broker, topic_partition: TopicPartition) -> WritablePartition:
    """The partition Produce appends to; raises _Refused for a read-only topic, ``T.delay``
    of no ``T`` (with the resolver's reason) or an unknown partition."""
    try:
        writable = broker.resolver.writable_partition(topic_partition)
    except TopicError as error:
        raise _Refused(ErrorCode(error.code), str(error)) from None
    if writable is None:
        raise _Refused(ErrorCode.unknown_topic_or_partition, None)
    return writable


def _check_transaction(
    broker: Broker,
    transactional_id: str | None,
    header: BatchHeader,
    topic_partition: TopicPartition,
) -> None:
    """Raises _Refused unless the transaction coordinator takes the transactional batch."""
    code = broker.transactions.check_produce(transactional_id, header, topic_partition)
    if code != ErrorCode.none:
        raise _Refused(code, None)


def _validate(records: memoryview | None, max_message_bytes: int) -> tuple[memoryview, BatchHeader]:
    """The partition's one record batch and its checked header; raises _Refused."""
    if not records:
        raise _Refused(ErrorCode.invalid_record, "no record batch for this partition")
    if len(records) > max_message_bytes:
        raise _Refused(
            ErrorCode.message_too_large,
            f"batch of {len(records)} bytes exceeds max.message.bytes={max_message_bytes}",
        )
    try:
        header = validate_produced(records)
    except InvalidBatch as error:
        if _holds_several_batches(records):
            raise _Refused(
                ErrorCode.invalid_record, "produce v3+ takes exactly one batch per partition"
            ) from None
        code = ErrorCode.corrupt_message if error.corrupt else ErrorCode.invalid_record
        raise _Refused(code, str(error)) from None
    return records, header


def _holds_several_batches(records: memoryview) -> bool:
    try:
        return sum(1 for _ in iter_batches(records)) > 1
    except InvalidBatch:
        return False


def _check_timestamps(header: BatchHeader, configs: dict[str, str], now_ms: int) -> None:
    if configs["message.timestamp.type"] != "CreateTime":
        return
    before = int(configs["message.timestamp.before.max.ms"])
    after = int(configs["message.timestamp.after.max.ms"])
    for timestamp in (header.base_timestamp, header.max_timestamp):
        if timestamp < 0:
            continue
        if now_ms - timestamp > before or timestamp - now_ms > after:
            raise _Refused(
                ErrorCode.invalid_timestamp,
                f"timestamp {timestamp} outside the window allowed around {now_ms}",
            )


def _check_records(
    check: Callable[[memoryview, int], str | None], records: memoryview, now_ms: int
) -> None:
    """A partition whose records must follow rules of their own (a delay companion's):
    the only place Produce decodes records, and only for such partitions."""
    refusal = check(records, now_ms)
    if refusal is not None:
        raise _Refused(ErrorCode.invalid_record, refusal)


async def wait_durable(appended: Appended) -> None:
    """Returns once each partition appended to is durable up to its batch, or answers
    KAFKA_STORAGE_ERROR for a log that failed meanwhile; each answer gets the log start
    offset of then. One after the other: every partition's flush is already under way,
    so this waits as long as gather() would, without a task per partition."""
    for _, partitions in appended:
        for result in partitions:
            log = result.log
            if log is None or result.error_code != ErrorCode.none:
                continue
            try:
                await log.wait_durable(result.durable_offset)
            except LogFailed as error:
                result.error_code, result.error_message = ErrorCode.kafka_storage_error, str(error)
            result.log_start_offset = log.log_start_offset
