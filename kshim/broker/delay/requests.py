"""What a record produced to ``T.delay`` asks for, read from its headers.

A record carries a due time, ``kshim-deliver-at`` (epoch ms) or ``kshim-delay-ms``
(after the record's own timestamp, so a retried or transactional record keeps the due
time its producer meant), or ``kshim-delay-cancel`` with a key. ``kshim-delay-replace``
with a key makes a delayed record replace the pending ones with that key. Produce checks
every record of a batch against these rules and refuses the whole batch with
INVALID_RECORD if one breaks them; nothing else is decoded on that path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

from kshim.broker.delay.naming import (
    CANCEL_HEADER,
    DELAY_MS_HEADER,
    DELIVER_AT_HEADER,
    REPLACE_HEADER,
)
from kshim.protocol.packed_record import MAX_HEADERS
from kshim.protocol.primitives import DecodeError
from kshim.protocol.records import RecordView, decode_views

MAX_DUE_MS = 2**63 - 1
_SAFE_DIGITS = len(str(MAX_DUE_MS)) - 1  # fewer digits than MAX_DUE_MS: always in range


class InvalidDelay(ValueError):
    """A record on ``T.delay`` that asks for nothing valid; the message says why."""


class DelayRequest(NamedTuple):  # a tuple: one is built for every record
    due_ms: int | None  # None: a cancel, which is not delivered itself
    cancels: bool  # removes the pending records with the record's key first


_CANCEL = DelayRequest(None, cancels=True)
# DelayRequest(...) runs a Python-level __new__; this builds the same tuple in C, once for
# every record a delay topic receives.
_request: Callable[[tuple[int, bool]], DelayRequest] = functools.partial(
    tuple.__new__, DelayRequest
)


def read_request(record: RecordView) -> DelayRequest:
    """What ``record`` asks for; raises InvalidDelay. Called for every record a delay
    topic receives, twice (Produce, then the schedule): one pass over the headers, where
    a header given twice counts with its last value."""
    headers = record.headers
    if len(headers) == 1:  # the common shape first: a due time, as ASCII digits, and no more
        name, value = headers[0]
        if name == DELIVER_AT_HEADER and value and value.isdigit() and len(value) <= _SAFE_DIGITS:
            return _request((int(value), False))
    if len(headers) > MAX_HEADERS:
        raise InvalidDelay(f"a delayed record carries at most {MAX_HEADERS} headers")
    deliver_at: bytes | None = None
    delay_ms: bytes | None = None
    has_deliver_at = has_delay_ms = cancels = replaces = False
    for name, value in headers:
        if name == DELIVER_AT_HEADER:
            deliver_at, has_deliver_at = value, True
        elif name == DELAY_MS_HEADER:
            delay_ms, has_delay_ms = value, True
        elif name == CANCEL_HEADER:
            cancels = True
        elif name == REPLACE_HEADER:
            replaces = True
    if cancels:
        _need_key(record, CANCEL_HEADER)
        return _CANCEL
    if replaces:
        _need_key(record, REPLACE_HEADER)
    if has_deliver_at:
        if has_delay_ms:
            raise InvalidDelay(f"give {DELIVER_AT_HEADER} or {DELAY_MS_HEADER}, not both")
        due_ms = _decimal(deliver_at, DELIVER_AT_HEADER)
        return _request((_in_range(due_ms, DELIVER_AT_HEADER), replaces))
    if has_delay_ms:
        if record.timestamp < 0:  # a producer that sets no timestamp (-1)
            raise InvalidDelay(f"{DELAY_MS_HEADER} counts from the record's timestamp, and "
                               f"this record has none: give {DELIVER_AT_HEADER}")  # fmt: skip
        due_ms = record.timestamp + _decimal(delay_ms, DELAY_MS_HEADER)
        return _request((_in_range(due_ms, DELAY_MS_HEADER), replaces))
    raise InvalidDelay(
        f"a record on a delay topic needs a {DELIVER_AT_HEADER} (epoch ms) or "
        f"{DELAY_MS_HEADER} header, or {CANCEL_HEADER} with a key"
    )


def check_batch(batch: memoryview, now_ms: int, max_delay_ms: int) -> str | None:
    """Why Produce must refuse this ``T.delay`` batch, or None when every record in it asks
    for a valid delay no further ahead than ``max_delay_ms`` (kshim.delay.max.ms)."""
    try:
        _, records = decode_views(batch)
    except DecodeError as error:
        return f"cannot read the records of a batch for a delay topic: {error}"
    latest = now_ms + max_delay_ms
    for record in records:
        # read_request's common shape, inlined: this runs for every record produced to a
        # delay topic, on the event loop, before Produce answers.
        headers = record.headers
        if len(headers) == 1:
            name, value = headers[0]
            if (name == DELIVER_AT_HEADER and value and value.isdigit()
                    and len(value) <= _SAFE_DIGITS and int(value) <= latest):  # fmt: skip
                continue
        try:
            due_ms = read_request(record).due_ms
        except InvalidDelay as error:
            return f"record at offset delta {record.offset}: {error}"
        if due_ms is not None and due_ms > latest:
            return (
                f"record at offset delta {record.offset}: due at {due_ms}, more than "
                f"kshim.delay.max.ms={max_delay_ms} ms after now ({now_ms})"
            )
    return None


def _decimal(value: bytes | None, name: str) -> int:
    if value is not None and value.isdigit() and len(value) <= _SAFE_DIGITS:
        return int(value)  # bytes.isdigit: ASCII digits only
    digits = (value or b"").strip()
    if not digits.isdigit():
        text = digits.decode("ascii", errors="replace")
        raise InvalidDelay(f"{name} must be a non-negative whole number of ms, not {text!r}")
    if len(digits) > len(str(MAX_DUE_MS)):  # and int() refuses past 4,300 digits
        raise InvalidDelay(f"{name} puts the due time past {MAX_DUE_MS}, the largest there is")
    return int(digits)


def _in_range(due_ms: int, name: str) -> int:
    # Due times are stored as signed 64-bit milliseconds, as Kafka's timestamps are.
    if due_ms > MAX_DUE_MS:
        raise InvalidDelay(f"{name} puts the due time past {MAX_DUE_MS}, the largest there is")
    return due_ms


def _need_key(record: RecordView, header: str) -> None:
    if record.key is None:
        raise InvalidDelay(f"{header} needs a record key (it applies to the pending records "
                           "with the same key)")  # fmt: skip
