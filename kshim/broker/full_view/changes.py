"""From stored batches of ``T`` to the changes the view applies: pure, run in a worker.

Only decided, keyed data becomes a change: control batches (transaction markers)
and batches of aborted transactions are skipped, as a read_committed consumer
skips them (KIP-98); records without a key are not part of the view. Each
record becomes a one-record, uncompressed, non-transactional v2 batch at its
original offset, with its original timestamp, key, value and headers.
"""

from __future__ import annotations

from collections.abc import Sequence

from kshim.broker.transactions.partition_state import is_aborted
from kshim.protocol.keyed_records import KeyedRecord, keyed_records
from kshim.protocol.record_batch import iter_batches
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.storage.views.full_view_store import ViewChange


def view_changes(
    batches: bytes,
    aborted: Sequence[AbortedTransaction],
    tombstone_expiry_ms: int,
) -> list[ViewChange]:
    """Returns the changes in offset order; ``tombstone_expiry_ms`` is when tombstones go.

    Only the last record of each key in ``batches`` becomes a change: an earlier one
    would be written and replaced in the same store transaction. Raises DecodeError for
    malformed record bytes.
    """
    view = memoryview(batches)
    latest: dict[bytes, KeyedRecord] = {}  # insertion order = offset order of the last
    for position, header in iter_batches(view):
        if header.is_control or is_aborted(header, aborted):
            continue
        for record in keyed_records(view[position : position + header.size]):
            latest.pop(record.key, None)
            latest[record.key] = record
    return [_change(record, tombstone_expiry_ms) for record in latest.values()]


def _change(record: KeyedRecord, tombstone_expiry_ms: int) -> ViewChange:
    expires_at = tombstone_expiry_ms if record.is_tombstone else None
    return ViewChange(record.offset, record.key, record.one_record_batch(), expires_at)
