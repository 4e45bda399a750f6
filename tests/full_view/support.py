"""A real Broker on a temporary directory with a fake clock, and helpers to write to
its logs and read its full-data views as a consumer would."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.full_view.applier import catch_up
from kshim.broker.full_view.reader import read_view, view_offsets
from kshim.broker.transactions.markers import marker_batch
from kshim.protocol.record_batch import TRANSACTIONAL_FLAG_MASK, iter_batches, read_header
from kshim.protocol.records import BatchSpec, Record, build_batch, decode_records
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.testing import FakeClock

START_MS = 1_000_000
TOPIC = "t"
SOURCE = TopicPartition(TOPIC, 0)
Write = tuple[bytes | None, bytes | None]  # (key, value)
PLAIN = BatchSpec()


async def open_broker(
    data_dir: Path, clock: FakeClock, in_process: bool = True, eager: bool = True
) -> Broker:
    """A broker on ``data_dir``; its view applied in threads unless ``in_process`` is false
    (a child process per broker would slow the property tests' many restarts). With
    ``eager`` every view is kept from the start (``kshim.full.view=true`` set for the
    broker), as these tests of the view's mechanics want; otherwise views are built when
    first read."""
    settings = {"log.dirs": str(data_dir), "kshim.full.view.process": str(not in_process)}
    if eager:
        settings["kshim.full.view"] = "true"
    broker = Broker(BrokerConfig.load([settings]), clock=clock)
    await broker.start()
    return broker


async def append(broker: Broker, writes: list[Write], spec: BatchSpec = PLAIN) -> int:
    """Appends one batch to partition 0 of ``t``; returns its base offset once durable."""
    log = broker.topics.log(SOURCE)
    assert log is not None
    records = [Record(i, broker.clock(), key, value) for i, (key, value) in enumerate(writes)]
    batch = bytearray(build_batch(records, spec))
    header = read_header(batch)
    offset = log.append(batch, header)
    broker.transactions.partition(SOURCE).on_append(header, offset)
    await log.wait_durable(offset)
    return offset


def transactional(producer_id: int) -> BatchSpec:
    return BatchSpec(
        attributes=TRANSACTIONAL_FLAG_MASK, producer_id=producer_id, producer_epoch=0,
        base_sequence=0,
    )  # fmt: skip


async def end_transaction(broker: Broker, producer_id: int, commit: bool) -> None:
    """Writes the marker as the transaction coordinator does (abort recorded first)."""
    log = broker.topics.log(SOURCE)
    assert log is not None
    state = broker.transactions.partition(SOURCE)
    first = state.open[producer_id].first_offset
    if not commit:
        planned = AbortedTransaction(producer_id, first, log.log_end_offset)
        await asyncio.to_thread(broker.metadata.transactions.add_aborted, SOURCE, planned)
    batch = marker_batch(producer_id, 0, commit, broker.clock())
    header = read_header(batch)
    offset = log.append(batch, header)
    if not commit:
        assert offset == planned.last_offset
        state.record_abort(planned)
    state.on_append(header, offset)
    await log.wait_durable(offset)


async def read_all(broker: Broker, max_bytes: int = 1 << 20) -> list[Record]:
    """Every record of ``t.full`` partition 0 read from earliest to the high watermark,
    fetch after fetch, moving to each batch's next offset as a consumer does."""
    await catch_up(broker, SOURCE)
    offsets = await view_offsets(broker.full_view, SOURCE)
    position = offsets.log_start_offset
    found: list[Record] = []
    while position < offsets.high_watermark:
        result = await read_view(broker.full_view, SOURCE, position, max_bytes)
        assert not result.out_of_range and result.batches
        for batch in result.batches:
            for _, header in iter_batches(batch):
                assert header.next_offset > position
                found += decode_records(batch)[1]
                position = header.next_offset
    assert position == offsets.high_watermark
    return found


def as_dict(records: list[Record]) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {record.key: (record.offset, record.value) for record in records}
