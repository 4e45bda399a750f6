"""The checks a produced batch passes before it is appended, each refusing with Kafka's
error code and a reason (the answer's error_message, v8+).

Batches are never decoded here: the header and CRC-32C are checked (record_batch.py).
Only a partition whose records follow rules of their own, a delay companion's, has its
records read (the resolver's ``WritablePartition.check``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import BatchHeader, InvalidBatch, iter_batches, validate_produced


class Refused(Exception):
    """The batch is not appended: ``code`` for the client, ``message`` saying why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def checked_batch(
    records: memoryview | None, max_message_bytes: int
) -> tuple[memoryview, BatchHeader]:
    """The partition's one record batch and its checked header; raises Refused."""
    if not records:
        raise Refused(ErrorCode.invalid_record, "no record batch for this partition")
    if len(records) > max_message_bytes:
        raise Refused(
            ErrorCode.message_too_large,
            f"batch of {len(records)} bytes exceeds max.message.bytes={max_message_bytes}",
        )
    try:
        return records, validate_produced(records)
    except InvalidBatch as error:
        if _holds_several_batches(records):
            raise Refused(
                ErrorCode.invalid_record, "produce v3+ takes exactly one batch per partition"
            ) from None
        code = ErrorCode.corrupt_message if error.corrupt else ErrorCode.invalid_record
        raise Refused(code, str(error)) from None


def _holds_several_batches(records: memoryview) -> bool:
    try:
        return sum(1 for _ in iter_batches(records)) > 1
    except InvalidBatch:
        return False


def check_timestamps(header: BatchHeader, configs: Mapping[str, str], now_ms: int) -> None:
    """CreateTime topics take timestamps within ``message.timestamp.before.max.ms`` and
    ``message.timestamp.after.max.ms`` of now (KIP-937); raises Refused."""
    if configs["message.timestamp.type"] != "CreateTime":
        return
    before = int(configs["message.timestamp.before.max.ms"])
    after = int(configs["message.timestamp.after.max.ms"])
    for timestamp in (header.base_timestamp, header.max_timestamp):
        if timestamp < 0:
            continue
        if now_ms - timestamp > before or timestamp - now_ms > after:
            raise Refused(
                ErrorCode.invalid_timestamp,
                f"timestamp {timestamp} outside the window allowed around {now_ms}",
            )


def check_records(
    check: Callable[[memoryview, int], str | None], records: memoryview, now_ms: int
) -> None:
    """A partition whose records must follow rules of their own (a delay companion's):
    the only place a produced batch's records are decoded, and only for such partitions."""
    refusal = check(records, now_ms)
    if refusal is not None:
        raise Refused(ErrorCode.invalid_record, refusal)
