"""Property test (hypothesis): a reader of ``t.full`` that keeps fetching while the view
changes under it (writes, transactions, applies, restarts, retention) never holds a key
state that never existed, and whenever it reaches the view's high watermark it holds
exactly the view as of that position: a snapshot, then every later change.

The reader is a consumer in miniature: it fetches small byte limits from its position,
applies each record to its dictionary (a tombstone is kept as the key's state, as a
streaming sink sees the delete), and moves to each batch's next offset.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.broker.broker import Broker
from kshim.broker.full_view.applier import apply_partition_once
from kshim.broker.full_view.reader import read_view, view_offsets
from kshim.broker.retention import enforce_retention_once
from kshim.protocol.record_batch import iter_batches
from kshim.protocol.records import decode_records
from kshim.testing import FakeClock
from tests.full_view.support import (
    SOURCE,
    TOPIC,
    Write,
    append,
    end_transaction,
    open_broker,
    transactional,
)

KEYS = st.sampled_from([b"a", b"b", b"c"])
VALUES = st.one_of(st.none(), st.binary(min_size=1, max_size=4))
WRITES = st.lists(st.tuples(st.one_of(st.none(), KEYS), VALUES), min_size=1, max_size=3)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), WRITES),
        st.tuples(st.just("transaction"), WRITES, st.booleans()),
        st.tuples(st.just("apply"), st.just([])),
        st.tuples(st.just("read"), st.just([])),
        st.tuples(st.just("read"), st.just([])),
        st.tuples(st.just("restart"), st.just([])),
        st.tuples(st.just("retention"), st.just([])),
    ),
    max_size=24,
)
KeyState = tuple[int, bytes | None]  # (offset, value); value None: deleted
PRODUCER_ID = 7
READ_MAX_BYTES = 1  # one batch per fetch: the reader interleaves as much as it can


@dataclass
class Reader:
    position: int = 0
    seen: dict[bytes, KeyState] = field(default_factory=dict)


def _record_history(history: dict[bytes, set[KeyState]], base: int, writes: list[Write]) -> None:
    for index, (key, value) in enumerate(writes):
        if key is not None:
            history.setdefault(key, set()).add((base + index, value))


async def _view_snapshot(broker: Broker) -> tuple[int, dict[bytes, KeyState]]:
    """(high watermark, key -> state) of the view as stored now, without applying more."""
    offsets = await view_offsets(broker.full_view, SOURCE)
    snapshot = {}
    for stored in broker.full_view.store.live_records(SOURCE):
        if stored.offset < offsets.high_watermark:
            for record in decode_records(stored.batch)[1]:
                assert record.key is not None
                snapshot[record.key] = (record.offset, record.value)
    return offsets.high_watermark, snapshot


async def _read_step(broker: Broker, reader: Reader, history: dict[bytes, set[KeyState]]) -> None:
    offsets = await view_offsets(broker.full_view, SOURCE)
    result = await read_view(broker.full_view, SOURCE, reader.position, READ_MAX_BYTES)
    assert not result.out_of_range  # the position never passes the high watermark
    for batch in result.batches:
        for _, header in iter_batches(batch):
            for record in decode_records(batch)[1]:
                assert record.key is not None  # keyless records are not in the view
                reader.seen[record.key] = (record.offset, record.value)
            assert header.next_offset > reader.position
            reader.position = header.next_offset
    assert reader.position <= offsets.high_watermark
    for key, state in reader.seen.items():
        assert state in history[key], f"{key!r} -> {state} never existed"
    if reader.position == offsets.high_watermark:
        high_watermark, snapshot = await _view_snapshot(broker)
        if high_watermark == reader.position:
            assert reader.seen == snapshot


async def _scenario(data_dir: Path, operations: list[tuple[object, ...]]) -> None:
    clock = FakeClock()
    broker = await open_broker(data_dir, clock)
    await broker.topics.create(TOPIC, 1, {"segment.bytes": "150", "retention.ms": "1000"})
    history: dict[bytes, set[KeyState]] = {}
    reader = Reader()
    try:
        for kind, *arguments in operations:
            if kind == "write":
                writes = arguments[0]
                _record_history(history, await append(broker, writes), writes)
            elif kind == "transaction":
                writes, committed = arguments
                base = await append(broker, writes, transactional(PRODUCER_ID))
                await end_transaction(broker, PRODUCER_ID, committed)
                if committed:
                    _record_history(history, base, writes)
            elif kind == "apply":
                await apply_partition_once(broker, SOURCE)
            elif kind == "read":
                await _read_step(broker, reader, history)
            elif kind == "restart":
                await broker.close()
                broker = await open_broker(data_dir, clock)
            else:
                clock.now_ms += 5_000
                await enforce_retention_once(broker)
        while reader.position < (await view_offsets(broker.full_view, SOURCE)).high_watermark:
            await _read_step(broker, reader, history)
        # Tombstones never expire here (delete.retention.ms is a day), so nothing is missed.
        assert (reader.position, reader.seen) == await _view_snapshot(broker)
    finally:
        await broker.close()


@settings(max_examples=60, deadline=None)
@given(OPERATIONS)
def test_a_reader_during_changes_sees_only_real_states_and_converges(
    operations: list[tuple[object, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_scenario(Path(directory), operations))
