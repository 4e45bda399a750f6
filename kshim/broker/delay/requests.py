"""What a record produced to ``T.delay`` asks for, read from its headers.

A record carries a due time, ``kshim-deliver-at`` (epoch ms) or ``kshim-delay-ms``
(after the record's own timestamp, so a retried or transactional record keeps the due
time its producer meant), or ``kshim-delay-cancel`` with a key. ``kshim-delay-replace``
with a key makes a delayed record replace the pending ones with that key. Produce checks
every record of a batch against these rules and refuses the whole batch with
INVALID_RECORD if one breaks them; nothing else is decoded on that path.
"""

from __future__ import annotations

from typing import NamedTuple

from kshim.broker.delay.naming import (
    CANCEL_HEADER,
    DELAY_MS_HEADER,
    DELIVER_AT_HEADER,
    REPLACE_HEADER,
)
from kshim.protocol.packed_record import MAX_HEADERS
from kshim.protocol.primitives import DecodeError
from kshim.protocol.records import Record, decode_records

MAX_DUE_MS = 2**63 - 1


class InvalidDelay(ValueError):
    """A record on ``T.delay`` that asks for nothing valid; the message says why."""


class DelayRequest(NamedTuple):  # a tuple: one is built for every record
    due_ms: int | None  # None: a cancel, which is not delivered itself
    cancels: bool  # removes the pending records with the record's key first


def read_request(record: Record) -> DelayRequest:
    """What ``record`` asks for; raises InvalidDelay."""
    if len(record.headers) > MAX_HEADERS:
        raise InvalidDelay(f"a delayed record carries at most {MAX_HEADERS} headers")
    headers = dict(record.headers)
    if CANCEL_HEADER in headers:
        _need_key(record, CANCEL_HEADER)
        return DelayRequest(None, cancels=True)
    replaces = REPLACE_HEADER in headers
    if replaces:
        _need_key(record, REPLACE_HEADER)
    return DelayRequest(_due_ms(record, headers), cancels=replaces)


def check_batch(batch: memoryview, now_ms: int, max_delay_ms: int) -> str | None:
    """Why Produce must refuse this ``T.delay`` batch, or None when every record in it asks
    for a valid delay no further ahead than ``max_delay_ms`` (kshim.delay.max.ms)."""
    try:
        _, records = decode_records(batch)
    except DecodeError as error:
        return f"cannot read the records of a batch for a delay topic: {error}"
    for record in records:
        try:
            request = read_request(record)
        except InvalidDelay as error:
            return f"record at offset delta {record.offset}: {error}"
        if request.due_ms is not None and request.due_ms - now_ms > max_delay_ms:
            return (
                f"record at offset delta {record.offset}: due at {request.due_ms}, more than "
                f"kshim.delay.max.ms={max_delay_ms} ms after now ({now_ms})"
            )
    return None


def _due_ms(record: Record, headers: dict[str, bytes | None]) -> int:
    deliver_at, delay_ms = headers.get(DELIVER_AT_HEADER), headers.get(DELAY_MS_HEADER)
    if DELIVER_AT_HEADER in headers and DELAY_MS_HEADER in headers:
        raise InvalidDelay(f"give {DELIVER_AT_HEADER} or {DELAY_MS_HEADER}, not both")
    if DELIVER_AT_HEADER in headers:
        return _in_range(_decimal(deliver_at, DELIVER_AT_HEADER), DELIVER_AT_HEADER)
    if DELAY_MS_HEADER in headers:
        if record.timestamp < 0:  # a producer that sets no timestamp (-1)
            raise InvalidDelay(f"{DELAY_MS_HEADER} counts from the record's timestamp, and "
                               f"this record has none: give {DELIVER_AT_HEADER}")  # fmt: skip
        return _in_range(record.timestamp + _decimal(delay_ms, DELAY_MS_HEADER), DELAY_MS_HEADER)
    raise InvalidDelay(
        f"a record on a delay topic needs a {DELIVER_AT_HEADER} (epoch ms) or "
        f"{DELAY_MS_HEADER} header, or {CANCEL_HEADER} with a key"
    )


def _decimal(value: bytes | None, name: str) -> int:
    digits = (value or b"").strip()
    if not digits.isdigit():  # bytes.isdigit: ASCII digits only, as the header is text
        text = digits.decode("ascii", errors="replace")
        raise InvalidDelay(f"{name} must be a non-negative whole number of ms, not {text!r}")
    return int(digits)


def _in_range(due_ms: int, name: str) -> int:
    # Due times are stored as signed 64-bit milliseconds, as Kafka's timestamps are.
    if due_ms > MAX_DUE_MS:
        raise InvalidDelay(f"{name} puts the due time past {MAX_DUE_MS}, the largest there is")
    return due_ms


def _need_key(record: Record, header: str) -> None:
    if record.key is None:
        raise InvalidDelay(f"{header} needs a record key (it applies to the pending records "
                           "with the same key)")  # fmt: skip
