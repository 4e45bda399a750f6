"""Helpers of the compaction tests: keyed batches, passes forced or due, records read back.

Everything here works on any ``interface.PartitionLog`` (the harness's four stores).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kshim.protocol.record_batch import BatchHeader, iter_batches, validate_produced
from kshim.protocol.records import BatchSpec, Record, build_batch, decode_records
from kshim.storage.compaction import (
    AbortedRange,
    CompactionPolicy,
    CompactionRequest,
    CompactionResult,
)
from kshim.storage.interface import LogConfig, LogStore, PartitionLog
from kshim.storage.log.log_store import DiskLogStore
from tests.storage.support import read_everything

# Every batch in a segment of its own: the cleaner's unit is the segment.
ONE_BATCH_SEGMENTS = LogConfig(segment_bytes=1, memtable_bytes=0)
DAY_MS = 86_400_000
NOW_MS = 10_000_000
Write = tuple[bytes | None, bytes | None]  # key, value (None: a tombstone)


@dataclass(frozen=True)
class StoredRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


def keyed_batch(
    writes: Sequence[Write], timestamp: int = 1_000, spec: BatchSpec | None = None
) -> tuple[bytearray, BatchHeader]:
    records = [
        Record(index, timestamp + index, key, value) for index, (key, value) in enumerate(writes)
    ]
    batch = bytearray(build_batch(records, spec or BatchSpec()))
    return batch, validate_produced(batch)


async def append(log: PartitionLog, batch: bytearray, header: BatchHeader | None = None) -> int:
    """Appends a batch (a control batch too: no producer validation) and waits for it."""
    from kshim.protocol.record_batch import read_header

    base = log.append(batch, header or read_header(batch))
    await log.wait_durable(base)
    return base


async def append_writes(
    log: PartitionLog, writes: Sequence[Write], timestamp: int = 1_000, per_batch: int = 1
) -> list[int]:
    """Appends ``writes`` ``per_batch`` at a time; returns their offsets."""
    offsets = []
    for start in range(0, len(writes), per_batch):
        chunk = writes[start : start + per_batch]
        base = await append(log, *keyed_batch(chunk, timestamp + start))
        offsets += range(base, base + len(chunk))
    return offsets


async def settle(store: LogStore) -> None:
    """Makes every rolled segment of a disk store sealed (the cleaner rewrites only those)."""
    if isinstance(store, DiskLogStore):
        await store.checkpoint()


def request(
    now_ms: int = NOW_MS,
    delete_retention_ms: int = DAY_MS,
    first_dirty: int = 0,
    stable: int = 1 << 62,
    force: bool = True,
    aborted: Sequence[AbortedRange] = (),
    producers: frozenset[int] = frozenset(),
    capacity: int = 1 << 20,
    policy: CompactionPolicy | None = None,
) -> CompactionRequest:
    return CompactionRequest(
        policy or CompactionPolicy(delete_retention_ms=delete_retention_ms),
        first_dirty,
        stable,
        now_ms,
        list(aborted),
        producers,
        capacity,
        force,
    )


async def compact(
    store: LogStore, log: PartitionLog, compaction: CompactionRequest | None = None
) -> CompactionResult | None:
    await settle(store)
    return await log.compact(compaction or request())


def records_of(data: bytes) -> list[StoredRecord]:
    found = []
    for position, header in iter_batches(data):
        _, records = decode_records(data[position : position + header.size])
        found += [
            StoredRecord(record.offset, record.key, record.value, record.timestamp, record.headers)
            for record in records
        ]
    return found


async def read_records(log: PartitionLog, offset: int | None = None) -> list[StoredRecord]:
    return records_of(await read_everything(log, offset))


def latest_by_key(records: Sequence[StoredRecord]) -> dict[bytes | None, StoredRecord]:
    latest: dict[bytes | None, StoredRecord] = {}
    for record in records:
        latest[record.key] = record
    return latest
