"""Transaction markers: the COMMIT/ABORT control batches written to each partition.

Layout (docs/protocol-notes.md §4.4): attributes control|transactional (0x30), the
transaction's producer id and epoch, base sequence -1, one uncompressed
record whose key is ``int16 version 0, int16 type`` (0 ABORT, 1 COMMIT) and
whose value is ``int16 version 0, int32 coordinator epoch``.
"""

from __future__ import annotations

import struct

from kshim.protocol.record_batch import CONTROL_FLAG_MASK, TRANSACTIONAL_FLAG_MASK
from kshim.protocol.records import BatchSpec, Record, build_batch

ABORT, COMMIT = 0, 1
COORDINATOR_EPOCH = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> bytearray:
    """Returns a control batch ending the producer's transaction."""
    record = Record(
        0,
        now_ms,
        _KEY.pack(0, COMMIT if commit else ABORT),
        _VALUE.pack(0, COORDINATOR_EPOCH),
    )
    spec = BatchSpec(
        attributes=CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
    )
    return bytearray(build_batch([record], spec))


def marker_type(key: bytes | None) -> int | None:
    """ABORT, COMMIT or None for a control record key."""
    if key is None or len(key) < _KEY.size:
        return None
    _, kind = _KEY.unpack_from(key)
    return int(kind)
