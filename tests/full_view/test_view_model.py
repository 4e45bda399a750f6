"""Property test (hypothesis): after any sequence of inserts, updates, deletes, keyless
records, committed and aborted transactions, partial applies, restarts and retention
runs, reading ``t.full`` from earliest equals a plain dictionary of the latest committed
value (or tombstone) of every key, at its original offset."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.broker.broker import Broker
from kshim.broker.full_view.applier import apply_partition_once
from kshim.broker.retention import enforce_retention_once
from kshim.testing import FakeClock
from tests.full_view.support import (
    SOURCE,
    TOPIC,
    Write,
    append,
    as_dict,
    end_transaction,
    open_broker,
    read_all,
    transactional,
)

KEYS = st.sampled_from([b"a", b"b", b"c", b"d"])
VALUES = st.one_of(st.none(), st.binary(min_size=0, max_size=8))
WRITES = st.lists(st.tuples(st.one_of(st.none(), KEYS), VALUES), min_size=1, max_size=3)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), WRITES),
        st.tuples(st.just("transaction"), WRITES, st.booleans()),
        st.tuples(st.just("apply"), st.just([])),
        st.tuples(st.just("restart"), st.just([])),
        st.tuples(st.just("retention"), st.just([])),
        st.tuples(st.just("check"), st.just([])),
    ),
    max_size=16,
)
Model = dict[bytes | None, tuple[int, bytes | None]]
PRODUCER_ID = 11
RETENTION_STEP_MS = 5_000


def _apply_to_model(model: Model, base_offset: int, writes: list[Write]) -> None:
    for index, (key, value) in enumerate(writes):
        if key is not None:
            model[key] = (base_offset + index, value)


async def _step(
    broker: Broker, data_dir: Path, clock: FakeClock, model: Model, operation: tuple[object, ...]
) -> Broker:
    kind, writes = operation[0], operation[1]
    assert isinstance(writes, list)
    if kind == "write":
        _apply_to_model(model, await append(broker, writes), writes)
    elif kind == "transaction":
        base = await append(broker, writes, transactional(PRODUCER_ID))
        committed = bool(operation[2])
        await end_transaction(broker, PRODUCER_ID, committed)
        if committed:
            _apply_to_model(model, base, writes)
    elif kind == "apply":
        await apply_partition_once(broker, SOURCE)
    elif kind == "check":
        assert as_dict(await read_all(broker)) == model
    elif kind == "restart":
        await broker.close()
        broker = await open_broker(data_dir, clock)
    else:
        clock.now_ms += RETENTION_STEP_MS
        await enforce_retention_once(broker)
    return broker


async def _scenario(data_dir: Path, operations: list[tuple[object, ...]]) -> None:
    clock = FakeClock()
    broker = await open_broker(data_dir, clock)
    configs = {"segment.bytes": "150", "retention.ms": "1000"}
    await broker.topics.create(TOPIC, 1, configs)
    model: Model = {}
    try:
        for operation in operations:
            broker = await _step(broker, data_dir, clock, model, operation)
        assert as_dict(await read_all(broker)) == model
    finally:
        await broker.close()


@settings(max_examples=40, deadline=None)
@given(OPERATIONS)
def test_view_equals_model_of_latest_committed_values(
    operations: list[tuple[object, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_scenario(Path(directory), operations))
