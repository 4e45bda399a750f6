"""From stored batches of ``T`` to the changes the view applies: pure, run in a worker.

Only decided, keyed data becomes a change: control batches (transaction markers)
and batches of aborted transactions are skipped, as a read_committed consumer
skips them (KIP-98); records without a key are not part of the view. Each
record is re-encoded as a one-record, uncompressed, non-transactional v2 batch
at its original offset, with its original timestamp, key, value and headers.
"""

from __future__ import annotations

from collections.abc import Sequence

from kshim.protocol.record_batch import BatchHeader, iter_batches
from kshim.protocol.records import BatchSpec, Record, build_batch, decode_records
from kshim.storage.full_view_store import ViewChange
from kshim.storage.transaction_store import AbortedTransaction


def view_changes(
    batches: bytes,
    aborted: Sequence[AbortedTransaction],
    tombstone_expiry_ms: int,
) -> list[ViewChange]:
    """Returns the changes in offset order; ``tombstone_expiry_ms`` is when tombstones go.

    Raises DecodeError for malformed record bytes.
    """
    view = memoryview(batches)
    changes = []
    for position, header in iter_batches(view):
        if header.is_control or _is_aborted(header, aborted):
            continue
        _, records = decode_records(view[position : position + header.size])
        changes += [
            _change(record, tombstone_expiry_ms) for record in records if record.key is not None
        ]
    return changes


def _is_aborted(header: BatchHeader, aborted: Sequence[AbortedTransaction]) -> bool:
    """An aborted entry covers its producer's transactional batches from its first
    offset up to its ABORT marker."""
    if not header.is_transactional:
        return False
    return any(
        entry.producer_id == header.producer_id
        and entry.first_offset <= header.base_offset < entry.last_offset
        for entry in aborted
    )


def _change(record: Record, tombstone_expiry_ms: int) -> ViewChange:
    assert record.key is not None
    batch = build_batch([record], BatchSpec(base_offset=record.offset))
    expires_at = tombstone_expiry_ms if record.value is None else None
    return ViewChange(record.offset, record.key, batch, expires_at)
