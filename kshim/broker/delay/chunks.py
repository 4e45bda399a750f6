"""What a chunk of ``T.delay`` does to the schedule, worked out away from the store: the
decided records decoded into changes (a scheduled record or a cancellation each), then
filed into the bytes each bucket file receives. Pure functions of the chunk's bytes and
of the few facts of the store they need (``ChunkRequest``), so that a worker process
(kshim/broker/delay/chunk_worker.py) can run them on a core the event loop does not use.

Only what a read_committed consumer would see is read (the caller reads up to the last
stable offset; aborted transactions and markers are skipped here, KIP-98), so a delayed
record produced in a transaction is scheduled when it commits and never if it aborts.
Records keep their key, value, headers and timestamp.
"""

from __future__ import annotations

import functools
import logging
from typing import NamedTuple

from kshim.broker.delay.naming import DELIVER_AT_HEADER
from kshim.broker.delay.requests import InvalidDelay, read_request
from kshim.broker.transactions.partition_state import is_aborted
from kshim.protocol.primitives import DecodeError
from kshim.protocol.record_batch import iter_batches
from kshim.protocol.records import RecordView, decode_views
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.storage.schedule.delay_filing import FiledChunk, Filer, NearBucket, Request

log = logging.getLogger(__name__)


class ChunkRequest(NamedTuple):
    """A chunk of stored batches of ``source`` (a ``T.delay`` partition) to file into the
    schedule of ``T``'s partition of the same number, with what the store said: the read
    position, the next seq, ``T``'s topic id and its near buckets."""

    data: bytes
    aborted: list[AbortedTransaction]
    source: TopicPartition
    start: int
    first_seq: int
    topic_id: int
    now_ms: int
    near: dict[int, NearBucket]


def file_request(request: ChunkRequest) -> FiledChunk:
    """The decided records of the chunk of ``request`` filed, for DelayStore.commit_chunk;
    records below ``request.start`` were read in before (a replay after a crash) and are
    left out."""
    filer = Filer(request.near)
    seq = request.first_seq
    cancels: list[tuple[bytes, int]] = []
    place = (request.topic_id, request.source.partition, request.now_ms)
    request_of = functools.partial(_request_of, request.source)
    view = memoryview(request.data)
    for position, header in iter_batches(view):
        if header.is_control or header.last_offset < request.start:
            continue
        if is_aborted(header, request.aborted):
            continue
        try:
            _, records = decode_views(view[position : position + header.size])
        except DecodeError as error:  # Produce checked it: only a damaged disk gets here
            log.error("%s: batch at %d unreadable, not scheduled: %s",
                      request.source, header.base_offset, error)  # fmt: skip
            continue
        if records and records[0].offset < request.start:
            records = [record for record in records if record.offset >= request.start]
        seq = filer.file_records(records, seq, place, DELIVER_AT_HEADER, request_of, cancels)
    return filer.chunk(request.start, request.first_seq, seq, request.topic_id, cancels,
                       request.near)  # fmt: skip


def _request_of(source: TopicPartition, record: RecordView) -> Request:
    """What ``record`` asks for; None (with a warning) when it asks for nothing valid."""
    try:
        return read_request(record)
    except InvalidDelay as error:  # accepted under other rules, or by an older kshim
        log.warning("%s: record %d of its delay topic not scheduled: %s",
                    source, record.offset, error)  # fmt: skip
        return None
