"""One partition's Fetch answer as the view applies it: whole batches and the aborted
transactions among them. Pure, run in a worker thread.

A Fetch answer may end with a partial batch (Kafka cuts at partition_max_bytes after the
first batch, KIP-74): only whole batches are applied, and the next fetch starts after the
last of them. Kafka lists each aborted transaction the answer overlaps by (producer id,
first offset); a read_committed consumer skips that producer's transactional batches from
there up to its ABORT marker (KIP-98, Kafka's CompletedFetch). The view's
``AbortedTransaction`` ends at the marker's offset, or, when the marker is not in the
answer, past the answer's end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kshim.client.topic_reader import ABORT_MARKER, CONTROL_KEY
from kshim.protocol.record_batch import iter_batches
from kshim.protocol.records import decode_records
from kshim.storage.meta.transaction_store import AbortedTransaction


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole batches of one partition, the offset after them, and their aborted
    transactions."""

    batches: bytes
    next_offset: int
    aborted: tuple[AbortedTransaction, ...]


def whole_chunk(records: bytes, aborted: Iterable[tuple[int, int]]) -> Chunk | None:
    """The whole batches of ``records`` (None when there is none); ``aborted`` holds the
    answer's (producer id, first offset) of aborted transactions. Raises DecodeError or
    InvalidBatch for a control batch that does not decode."""
    end = 0
    next_offset = -1
    aborts: list[tuple[int, int]] = []  # (producer id, ABORT marker offset) in offset order
    for position, header in iter_batches(records):
        end = position + header.size
        next_offset = header.next_offset
        if header.is_control and _is_abort(records[position:end]):
            aborts.append((header.producer_id, header.base_offset))
    if end == 0:
        return None
    ranges = tuple(
        AbortedTransaction(producer_id, first, _marker(aborts, producer_id, first, next_offset))
        for producer_id, first in sorted(aborted, key=lambda entry: entry[1])
    )
    return Chunk(records[:end], next_offset, ranges)


def _marker(aborts: list[tuple[int, int]], producer_id: int, first: int, past_end: int) -> int:
    """The offset of the producer's first ABORT marker at or after ``first``, or
    ``past_end`` when the chunk does not hold it (the transaction covers the whole rest)."""
    return next(
        (offset for producer, offset in aborts if producer == producer_id and offset >= first),
        past_end,
    )


def _is_abort(batch: bytes) -> bool:
    """Whether a control batch holds an ABORT marker (ControlRecordType 0)."""
    for record in decode_records(batch)[1]:
        if record.key is not None and len(record.key) >= CONTROL_KEY.size:
            marker_type: int = CONTROL_KEY.unpack_from(record.key)[1]
            return marker_type == ABORT_MARKER
    return False
