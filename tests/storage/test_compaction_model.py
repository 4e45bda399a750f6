"""A property test of compaction against a plain history of every write.

Hypothesis writes random keyed records and tombstones (one to three per batch, into
small segments), with compaction passes, clock advances and restarts interleaved. After
every step a reader from offset 0 must see:

- offsets strictly increasing, each record exactly as written at that offset (so never a
  value that was not its key's latest at some point);
- for each key its latest value, or its latest tombstone unless the tombstone may have
  expired (``delete.retention.ms`` after the first pass that could have seen it);
- below where the last pass stopped, at most one record per key: its latest there.

At the end a pass after the horizon leaves no tombstone and exactly the latest values.
The same rules run over the in-memory twin, the disk store on the simulated filesystem
and on real files.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import LogConfig, LogStore, PartitionLog, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.testing import FakeClock
from tests.storage.compaction_support import (
    StoredRecord,
    Write,
    append_writes,
    compact,
    read_records,
    request,
)

PARTITION = TopicPartition("model", 0)
RETENTION_MS = 1_000
KEYS = [b"k%d" % index for index in range(5)]

writes = st.lists(
    st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=8))),
    min_size=1,
    max_size=3,
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), writes),
        st.tuples(st.just("compact"), st.integers(0, 1_500)),
        st.tuples(st.just("reopen"), st.none()),
    ),
    max_size=30,
)


@dataclass
class Model:
    """Every write at its offset, and when the cleaner passed."""

    history: dict[int, Write] = field(default_factory=dict)
    now_ms: int = 1_000_000
    passes: list[tuple[int, int]] = field(default_factory=list)  # (time, log end) of each
    cleaned_end: int = 0  # where the last pass stopped

    def latest(self, below: int | None = None) -> dict[bytes | None, tuple[int, bytes | None]]:
        found: dict[bytes | None, tuple[int, bytes | None]] = {}
        for offset, (key, value) in sorted(self.history.items()):
            if below is None or offset < below:
                found[key] = (offset, value)
        return found

    def tombstone_may_be_gone(self, offset: int) -> bool:
        """Whether a pass came ``RETENTION_MS`` after the first pass run once it was
        written: only then can its delete horizon have passed."""
        after = [time for time, end in self.passes if end > offset]
        return bool(after) and after[-1] - after[0] >= RETENTION_MS


def check(model: Model, records: list[StoredRecord]) -> None:
    offsets = [record.offset for record in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for record in records:
        assert (record.key, record.value) == model.history[record.offset], record
    present = {record.offset for record in records}
    for offset, value in model.latest().values():
        if value is not None or not model.tombstone_may_be_gone(offset):
            assert offset in present, f"the latest record of its key at {offset} is missing"
    cleaned = [record for record in records if record.offset < model.cleaned_end]
    keys = [record.key for record in cleaned]
    assert len(keys) == len(set(keys)), "a superseded record survived a pass"
    latest_cleaned = model.latest(model.cleaned_end)
    for record in cleaned:
        assert latest_cleaned[record.key][0] == record.offset


Opener = Callable[[], LogStore]


async def _run(open_store: Opener, segment_bytes: int, plan: list[tuple[str, object]]) -> None:
    config = LogConfig(segment_bytes=segment_bytes, memtable_bytes=0)
    model = Model()
    store = open_store()
    log: PartitionLog = await store.open(PARTITION, config, 0)
    try:
        for action, argument in plan:
            if action == "append":
                batch: list[Write] = argument  # type: ignore[assignment]
                offsets = await append_writes(log, batch, model.now_ms, per_batch=len(batch))
                model.history.update(zip(offsets, batch, strict=True))
            elif action == "compact":
                model.now_ms += argument  # type: ignore[operator]
                await _pass(store, log, model)
            else:
                await store.close()
                store = open_store()
                log = await store.open(PARTITION, config, 0)
            check(model, await read_records(log))
        closing: list[Write] = [(b"last", b"1")] * 20  # rolls every earlier segment
        offsets = await append_writes(log, closing, model.now_ms)
        model.history.update(zip(offsets, closing, strict=True))
        await _pass(store, log, model)
        model.now_ms += RETENTION_MS
        await _pass(store, log, model)
        records = await read_records(log)
        check(model, records)
        expected = {key: value for key, (_, value) in model.latest(model.cleaned_end).items()}
        cleaned = [record for record in records if record.offset < model.cleaned_end]
        assert {record.key: record.value for record in cleaned} == {
            key: value for key, value in expected.items() if value is not None
        }
    finally:
        await store.close()


async def _pass(store: LogStore, log: PartitionLog, model: Model) -> None:
    compaction = request(model.now_ms, RETENTION_MS, first_dirty=model.cleaned_end)
    result = await compact(store, log, compaction)
    model.passes.append((model.now_ms, log.log_end_offset))
    if result is not None:
        model.cleaned_end = result.first_dirty_offset


@pytest.mark.parametrize("kind", ["memory", "simulated", "disk"])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=steps, segment_bytes=st.sampled_from([1, 150, 400]))
def test_compaction_agrees_with_the_history(
    kind: str, plan: list[tuple[str, object]], segment_bytes: int
) -> None:
    clock = FakeClock()
    directory = tempfile.mkdtemp(prefix="compaction-model-")
    filesystem = SimulatedFileSystem()
    openers: dict[str, Opener] = {
        "memory": _memory_opener(clock),
        "simulated": lambda: DiskLogStore("/data", clock, filesystem),
        "disk": lambda: DiskLogStore(directory, clock),
    }
    try:
        asyncio.run(_run(openers[kind], segment_bytes, plan))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _memory_opener(clock: FakeClock) -> Opener:
    store = MemoryLogStore(clock)  # a restart reopens the same twin, as its docstring says
    return lambda: store
