"""A stateful property test of each log store against a plain list of batches.

Hypothesis appends batches (one at a time or several concurrently), reads
from arbitrary offsets with arbitrary byte limits, looks up timestamps, moves
the log start offset, drops old segments, and closes and reopens the log
(on disk, sometimes with a torn tail appended to the last segment file).
After every step the log must agree with the model: the same offsets, the
same bytes, nothing lost or doubled. The same rules run over the disk store
and the in-memory one; a log needs a running event loop, so each example
drives its own.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import tempfile
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kshim.protocol.record_batch import (
    iter_batches,
    validate_produced,
)
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.interface import (
    LogConfig,
    LogStore,
    OffsetOutOfRange,
    PartitionLog,
    TopicPartition,
)
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.storage.log.segment import segment_file_name
from tests.storage.support import materialize

T = TypeVar("T")
TOPIC_PARTITION = TopicPartition("model", 0)
UNBOUNDED = 1 << 40

record_timestamps = st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=6)


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    data: bytes  # exactly as the log must store it: offsets and leader epoch stamped
    timestamps: tuple[int, ...]

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.timestamps)


class PartitionLogMachine(RuleBasedStateMachine):
    """The rules any log store follows; a subclass says which store."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = tempfile.mkdtemp(prefix="kshim-model-")
        self.store = self.make_store()
        self.config = LogConfig()
        self.model: list[StoredBatch] = []
        self.log_start_offset = 0
        self.log: PartitionLog | None = None
        self.appended = 0

    def make_store(self) -> LogStore:
        raise NotImplementedError

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    @property
    def partition_log(self) -> PartitionLog:
        assert self.log is not None
        return self.log

    @property
    def end_offset(self) -> int:
        return self.model[-1].next_offset if self.model else 0

    def open(self) -> None:
        self.log = self.run(self.store.open(TOPIC_PARTITION, self.config, self.log_start_offset))

    @initialize(
        segment_bytes=st.sampled_from([150, 600, 1 << 20]),
        memtable_bytes=st.sampled_from([0, 300, 1 << 20]),
    )
    def start(self, segment_bytes: int, memtable_bytes: int) -> None:
        self.config = LogConfig(segment_bytes=segment_bytes, memtable_bytes=memtable_bytes)
        self.open()

    def new_batch(self, timestamps: list[int]) -> tuple[bytearray, bytes]:
        """A producer batch and what the log must store for it at the model's end offset."""
        self.appended += 1
        records = [
            Record(index, timestamp, b"k", b"batch-%d-%d" % (self.appended, index))
            for index, timestamp in enumerate(timestamps)
        ]
        batch = bytearray(build_batch(records, BatchSpec()))
        expected = bytearray(batch)
        struct.pack_into(">q", expected, 0, self.end_offset)  # BaseOffset
        struct.pack_into(">i", expected, 12, 0)  # PartitionLeaderEpoch
        return batch, bytes(expected)

    @rule(timestamps=record_timestamps)
    def append(self, timestamps: list[int]) -> None:
        batch, expected = self.new_batch(timestamps)
        log = self.partition_log

        async def produce() -> int:  # append needs the running loop for its flusher
            base_offset = log.append(batch, validate_produced(batch))
            await log.wait_durable(base_offset + len(timestamps) - 1)
            return base_offset

        assert self.run(produce()) == self.end_offset
        self.model.append(StoredBatch(self.end_offset, expected, tuple(timestamps)))

    @rule(batches=st.lists(record_timestamps, min_size=2, max_size=5))
    def append_concurrently(self, batches: list[list[int]]) -> None:
        log = self.partition_log

        async def produce(batch: bytearray) -> int:
            header = validate_produced(batch)
            base_offset = log.append(batch, header)
            await log.wait_durable(base_offset + header.last_offset_delta)
            return base_offset

        prepared = []
        for timestamps in batches:
            batch, expected = self.new_batch(timestamps)
            self.model.append(StoredBatch(self.end_offset, expected, tuple(timestamps)))
            prepared.append(batch)

        async def produce_all() -> list[int]:
            return list(await asyncio.gather(*(produce(batch) for batch in prepared)))

        bases = self.run(produce_all())
        assert bases == [stored.base_offset for stored in self.model[-len(batches) :]]

    @rule(data=st.data(), reads=st.integers(min_value=1, max_value=5))
    def read(self, data: st.DataObject, reads: int) -> None:
        for _ in range(reads):
            offset = data.draw(
                st.integers(min_value=self.log_start_offset, max_value=self.end_offset)
            )
            self.check_read(offset, data.draw(self.byte_limits(offset)))

    def check_read(self, offset: int, max_bytes: int) -> None:
        """One read, compared with the model batch by batch."""
        log = self.partition_log
        result = self.run(log.read(offset, max_bytes))
        returned = b"".join(materialize(chunk) for chunk in result.chunks)
        assert result.size == len(returned)
        if offset == self.end_offset:
            assert (returned, result.end_offset) == (b"", offset)
            return
        first = max(i for i, stored in enumerate(self.model) if stored.base_offset <= offset)
        bases = [header.base_offset for _, header in iter_batches(returned)]
        assert bases, "a read below the high watermark returns at least one batch"
        last = first + len(bases) - 1
        expected = self.model[first : last + 1]
        assert returned == b"".join(stored.data for stored in expected)
        assert result.end_offset == expected[-1].next_offset
        if len(expected) > 1:
            assert len(returned) <= max_bytes
        if last + 1 < len(self.model):  # stopped early: only for max_bytes or a segment end
            following = self.model[last + 1]
            segment_bases = {summary.base_offset for summary in log.segment_summaries()}
            assert (
                len(returned) + len(following.data) > max_bytes
                or following.base_offset in segment_bases
            )

    def byte_limits(self, offset: int) -> st.SearchStrategy[int]:
        """Any limit, or one within a byte of where a batch ends (where off-by-ones hide)."""
        following = [stored for stored in self.model if stored.next_offset > offset]
        ends = [sum(len(stored.data) for stored in following[: count + 1]) for count in range(4)]
        near_ends = st.builds(
            lambda end, delta: max(end + delta, 0),
            st.sampled_from(ends),
            st.integers(min_value=-1, max_value=1),
        )
        return near_ends | near_ends | st.integers(min_value=0, max_value=1200)

    @rule(offset=st.integers(min_value=1, max_value=50))
    def read_out_of_range(self, offset: int) -> None:
        log = self.partition_log
        for bad in (self.end_offset + offset, self.log_start_offset - offset):
            try:
                self.run(log.read(bad, UNBOUNDED))
            except OffsetOutOfRange:
                continue
            raise AssertionError(f"read at {bad} outside the log did not raise")

    @rule(timestamp=st.integers(min_value=0, max_value=5100))
    def lookup_timestamp(self, timestamp: int) -> None:
        expected = None
        for stored in self.model:
            for index, record_timestamp in enumerate(stored.timestamps):
                offset = stored.base_offset + index
                if offset >= self.log_start_offset and record_timestamp >= timestamp:
                    expected = (offset, record_timestamp)
                    break
            if expected is not None:
                break
        assert self.run(self.partition_log.offset_for_timestamp(timestamp)) == expected

    @precondition(lambda self: self.end_offset > self.log_start_offset)
    @rule(data=st.data())
    def advance_log_start_offset(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(min_value=self.log_start_offset, max_value=self.end_offset))
        self.partition_log.advance_log_start_offset(offset)
        self.log_start_offset = offset

    @rule(count=st.integers(min_value=0, max_value=4))
    def drop_oldest_segments(self, count: int) -> None:
        """Retention: whole segments go, never the active one; the log start follows."""
        log = self.partition_log
        before = log.segment_summaries()
        self.run(log.drop_oldest_segments(count, self.log_start_offset))
        dropped = min(count, len(before) - 1)
        assert log.segment_summaries() == before[dropped:]
        if dropped > 0:
            self.log_start_offset = max(self.log_start_offset, before[dropped].base_offset)

    @rule()
    def reopen(self) -> None:
        self.run(self.store.close())
        self.open()

    @invariant()
    def offsets_agree(self) -> None:
        if self.log is None:
            return
        assert self.log.log_end_offset == self.log.high_watermark == self.end_offset
        assert self.log.log_start_offset == self.log_start_offset

    @invariant()
    def everything_reads_back(self) -> None:
        if self.log is None:
            return
        visible = [stored for stored in self.model if stored.next_offset > self.log_start_offset]
        position = self.log_start_offset
        data = b""
        while position < self.end_offset:
            result = self.run(self.log.read(position, UNBOUNDED))
            assert result.end_offset > position
            data += b"".join(materialize(chunk) for chunk in result.chunks)
            position = result.end_offset
        assert data == b"".join(stored.data for stored in visible)

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
            self.run(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()
            shutil.rmtree(self.directory, ignore_errors=True)


class DiskLogMachine(PartitionLogMachine):
    def make_store(self) -> LogStore:
        self.disk_store = DiskLogStore(self.directory, lambda: 0)
        return self.disk_store

    @rule(tail=st.binary(min_size=1, max_size=120))
    def reopen_after_a_torn_write(self, tail: bytes) -> None:
        active = self.partition_log.segment_summaries()[-1]
        self.run(self.store.close())
        directory = self.disk_store.directory_of(TOPIC_PARTITION)
        with open(os.path.join(directory, segment_file_name(active.base_offset)), "ab") as handle:
            handle.write(tail)
        self.open()


class MemoryLogMachine(PartitionLogMachine):
    def make_store(self) -> LogStore:
        return MemoryLogStore(lambda: 0)


MODEL_SETTINGS = settings(max_examples=30, stateful_step_count=20, deadline=None)
DiskLogMachine.TestCase.settings = MODEL_SETTINGS
MemoryLogMachine.TestCase.settings = MODEL_SETTINGS
TestDiskLogModel = DiskLogMachine.TestCase
TestMemoryLogModel = MemoryLogMachine.TestCase
