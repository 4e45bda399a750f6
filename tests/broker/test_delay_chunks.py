"""Filing a chunk of ``T.delay`` (kshim/broker/delay/chunks.py), in this process and in
the chunk worker (chunk_worker.py), against a model: every record decoded with the full
decoder into a Record, read with ``read_request``, packed with ``pack_record`` and filed
change by change (delay_filing.file_chunk, what DelayStore.schedule does). The chunk's
batches are drawn with every codec, transactional, aborted and control batches, keys and
values present or null, and headers of every shape a delay topic can be sent; the store's
near buckets (delivery marks, minutes held in memory) too. And the Produce check's inlined
common shape against ``read_request``.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kshim.broker.child_process import ChildFailed
from kshim.broker.delay.chunk_worker import ChunkWorker
from kshim.broker.delay.chunks import ChunkRequest, file_request
from kshim.broker.delay.ingest import _commit as ingest_commit
from kshim.broker.delay.naming import (
    CANCEL_HEADER,
    DELAY_MS_HEADER,
    DELIVER_AT_HEADER,
    REPLACE_HEADER,
)
from kshim.broker.delay.requests import InvalidDelay, check_batch, read_request
from kshim.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kshim.protocol.packed_record import pack_record
from kshim.protocol.record_batch import (
    CONTROL_FLAG_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    iter_batches,
    stamped,
)
from kshim.protocol.records import BatchSpec, Header, Record, build_batch, decode_records
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.storage.schedule.delay_buckets import MINUTE_MS
from kshim.storage.schedule.delay_filing import (
    FiledChunk,
    NearBucket,
    ScheduleChange,
    file_chunk,
)
from kshim.storage.schedule.delay_records import StaleChunk
from kshim.storage.schedule.delay_store import DelayStore

NOW = 1_700_000_000_000
SOURCE = TopicPartition("orders.delay", 3)
TARGET = TopicPartition("orders", 3)
TOPIC_ID = 5
PRODUCER_ID = 77
MAX_DELAY_MS = 2 * 365 * 24 * 3600 * 1000


def model_chunk(request: ChunkRequest) -> FiledChunk:
    """What the schedule was sent before records were filed straight from their fields:
    a Record each, read_request, pack_record, one ScheduleChange per valid record."""
    changes: list[ScheduleChange] = []
    view = memoryview(request.data)
    for position, header in iter_batches(view):
        if header.is_control:
            continue
        if header.is_transactional and any(
            entry.producer_id == header.producer_id
            and entry.first_offset <= header.base_offset < entry.last_offset
            for entry in request.aborted
        ):
            continue
        for record in decode_records(view[position : position + header.size])[1]:
            try:
                due_ms, cancels = read_request(record)
            except InvalidDelay:
                continue
            packed = None if due_ms is None else pack_record(record)
            changes.append(ScheduleChange(record.offset, record.key, cancels, due_ms, packed))
    return file_chunk(changes, request.start, request.first_seq, request.topic_id,
                      request.source.partition, request.now_ms, request.near)  # fmt: skip


DIGITS = st.integers(0, 10**19).map(lambda number: str(number).encode())
HEADER_VALUES = st.one_of(
    DIGITS,
    st.none(),
    st.just(b""),
    st.sampled_from([b"+5", b" 12", b"1_000", b"12a", b"\xd9\xa3", b"0" * 30, b"-1"]),
    st.binary(max_size=8),
)
HEADER_NAMES = [DELIVER_AT_HEADER, DELIVER_AT_HEADER, DELAY_MS_HEADER, CANCEL_HEADER,
                REPLACE_HEADER, "other", "kshim-deliver-a", "ключ"]  # fmt: skip
HEADER = st.tuples(st.sampled_from(HEADER_NAMES), HEADER_VALUES)
# Due times near NOW, so the near buckets and the minute buckets are met.
NEAR_DUE = st.integers(NOW - 2 * MINUTE_MS, NOW + 5 * MINUTE_MS).map(lambda due: str(due).encode())


@st.composite
def delay_records(draw: st.DrawFn) -> list[Record]:
    records = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            headers: tuple[Header, ...] = ((DELIVER_AT_HEADER, draw(NEAR_DUE)),)
        else:
            headers = tuple(draw(st.lists(HEADER, max_size=3)))
        key = draw(st.one_of(st.none(), st.binary(max_size=6)))
        value = draw(st.one_of(st.none(), st.binary(max_size=20)))
        timestamp = draw(st.one_of(st.just(NOW), st.integers(-1, NOW + 10**6)))
        records.append(Record(len(records), timestamp, key, value, headers))
    return records


@st.composite
def chunks(draw: st.DrawFn) -> ChunkRequest:
    """Stored batches (each its own codec, some transactional, some control batches,
    some of a transaction that aborted) and what the store says of itself."""
    batches, aborted, offset = [], [], 100
    for _ in range(draw(st.integers(1, 5))):
        records = draw(delay_records())
        attributes = draw(st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]))
        attributes |= draw(st.sampled_from([0, 0, TIMESTAMP_TYPE_MASK]))
        producer_id = -1
        if draw(st.booleans()):
            attributes |= TRANSACTIONAL_FLAG_MASK
            producer_id = PRODUCER_ID
            if draw(st.booleans()):
                aborted.append(AbortedTransaction(PRODUCER_ID, offset, offset + len(records)))
        if draw(st.integers(0, 5)) == 0:
            attributes |= CONTROL_FLAG_MASK
        spec = BatchSpec(attributes=attributes, producer_id=producer_id, producer_epoch=0,
                         base_sequence=0 if producer_id >= 0 else -1)  # fmt: skip
        batches.append(stamped(build_batch(records, spec), offset, 0))
        offset += len(records)
    start = draw(st.integers(90, offset))
    near = {}
    for minute in draw(st.lists(st.integers(-2, 5), max_size=3, unique=True)):
        start_ms = NOW - NOW % MINUTE_MS + minute * MINUTE_MS
        mark = (start_ms + draw(st.integers(0, MINUTE_MS)), draw(st.integers(0, 50)))
        near[start_ms] = NearBucket(draw(st.sampled_from([mark, (-(1 << 63), -1)])),
                                    draw(st.booleans()))  # fmt: skip
    return ChunkRequest(b"".join(batches), aborted, SOURCE, start, 40, TOPIC_ID, NOW, near)


@given(chunks())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_a_chunk_is_filed_as_the_model_files_it(request: ChunkRequest) -> None:
    assert file_request(request) == model_chunk(request)


def common(due: int, key: bytes | None = b"k", value: bytes | None = b"v") -> Record:
    return Record(0, NOW, key, value, ((DELIVER_AT_HEADER, str(due).encode()),))


def request_of(*batches: bytes, near: dict[int, NearBucket] | None = None) -> ChunkRequest:
    return ChunkRequest(b"".join(batches), [], SOURCE, 0, 0, TOPIC_ID, NOW, near or {})


@pytest.mark.parametrize(
    "record",
    [
        common(NOW + 10_000),
        common(NOW - 10_000),  # past: the current minute
        common(NOW + 400 * 24 * 3600 * 1000),  # a week's bucket
        common(NOW + 10_000, key=None),
        common(NOW + 10_000, value=None),
        common(NOW + 10_000, key=None, value=None),
        Record(0, NOW, b"k", b"v", ((DELIVER_AT_HEADER, b"9" * 18),)),  # the most digits
        Record(0, NOW, b"k", b"v", ((DELIVER_AT_HEADER, b"9" * 19),)),  # past them
    ],
)
def test_the_common_shape_is_filed_as_the_model_files_it(record: Record) -> None:
    request = request_of(stamped(build_batch([record]), 0, 0))
    assert file_request(request) == model_chunk(request)


def test_records_for_a_minute_being_delivered_go_behind_its_mark_and_into_memory() -> None:
    minute = NOW - NOW % MINUTE_MS
    near = {minute: NearBucket((NOW + 5, 3), True)}
    records = [common(NOW + 1), common(NOW + 20_000)]
    request = request_of(stamped(build_batch(records), 0, 0), near=near)
    filed = file_request(request)
    assert filed == model_chunk(request)
    assert [(entry[0], entry[1]) for entry in filed.loaded] == [  # order ms, seq
        (NOW + 6, 0),
        (NOW + 20_000, 1),
    ]


def test_an_unreadable_batch_is_left_out_and_the_others_filed() -> None:
    good = stamped(build_batch([common(NOW + 1)]), 0, 0)
    bad = bytearray(stamped(build_batch([common(NOW + 2)], BatchSpec(attributes=GZIP)), 1, 0))
    bad[-8:] = b"\xff" * 8  # the gzip stream damaged
    filed = file_request(request_of(good, bytes(bad)))
    assert (filed.seqs, filed.filed) == (1, 1)


BATCHES = st.lists(delay_records(), min_size=1, max_size=3)


@given(st.lists(st.one_of(delay_records(), st.just([common(NOW + MAX_DELAY_MS + 1)]))))
@example([[common(NOW + MAX_DELAY_MS)]])
@example([[common(NOW + MAX_DELAY_MS + 1)]])
def test_the_produce_check_answers_as_read_request_does(batches: list[list[Record]]) -> None:
    for records in batches:
        expected = None
        for record in records:
            try:
                due_ms = read_request(record).due_ms
            except InvalidDelay:
                expected = "refused"
                break
            if due_ms is not None and due_ms > NOW + MAX_DELAY_MS:
                expected = "refused"
                break
        refusal = check_batch(memoryview(build_batch(records)), NOW, MAX_DELAY_MS)
        assert (refusal and "refused") == expected


# -- the worker process ------------------------------------------------------------------


@pytest.fixture
def worker() -> Iterator[ChunkWorker]:
    chunk_worker = ChunkWorker(min_bytes=1)  # every chunk goes to the child
    yield chunk_worker
    chunk_worker.close()


def large_request() -> ChunkRequest:
    batches = [
        stamped(build_batch([common(NOW + index * 997 + offset) for offset in range(100)]),
                index * 100, 0)
        for index in range(20)
    ]  # fmt: skip
    return request_of(*batches)


def test_the_worker_files_a_chunk_as_this_process_does(worker: ChunkWorker) -> None:
    request = large_request()
    assert worker.file(request) == file_request(request)
    assert worker.file(request) == file_request(request)  # the same child, again
    assert worker.started == 1


def test_a_worker_that_died_is_replaced_and_its_chunk_filed_here(worker: ChunkWorker) -> None:
    request = large_request()
    worker.file(request)
    process = worker.process
    assert process is not None
    process.kill()
    process.wait()
    assert worker.file(request) == file_request(request)  # filed here meanwhile
    assert worker.file(request) == file_request(request)
    assert worker.started == 2


def test_filing_that_raises_in_the_worker_raises_here(worker: ChunkWorker) -> None:
    broken = large_request()._replace(near=None)  # type: ignore[arg-type]
    with pytest.raises(ChildFailed, match="AttributeError"):
        worker.file(broken)
    request = large_request()
    assert worker.file(request) == file_request(request)  # the child lives on


def test_close_ends_the_worker(worker: ChunkWorker) -> None:
    worker.file(large_request())
    process = worker.process
    assert process is not None
    worker.close()
    assert process.poll() == 0


def test_a_worker_idle_long_enough_is_ended_and_the_next_chunk_starts_another() -> None:
    now = [0.0]
    chunk_worker = ChunkWorker(min_bytes=1, clock=lambda: now[0])
    try:
        request = large_request()
        chunk_worker.file(request)
        process = chunk_worker.process
        assert process is not None
        now[0] += 29.0
        assert chunk_worker.close_if_idle(30.0)
        assert process.poll() is None
        now[0] += 1.0
        assert not chunk_worker.close_if_idle(30.0)
        assert process.poll() == 0
        assert chunk_worker.file(request) == file_request(request)
        assert chunk_worker.started == 2
    finally:
        chunk_worker.close()


def test_small_chunks_never_start_a_worker() -> None:
    chunk_worker = ChunkWorker()
    request = request_of(stamped(build_batch([common(NOW + 1)]), 0, 0))
    assert chunk_worker.file(request) == file_request(request)
    assert chunk_worker.started == 0


# -- committing ----------------------------------------------------------------------------


def test_a_chunk_filed_before_the_schedule_moved_is_not_committed(tmp_path: Path) -> None:
    store = DelayStore(str(tmp_path / "delays"))
    try:
        batch = stamped(build_batch([common(NOW + 10_000)]), 0, 0)

        def request(start: int) -> ChunkRequest:
            return ChunkRequest(batch, [], SOURCE, start, store.next_seq,
                                store.topic_id(TARGET.topic), NOW,
                                store.near_buckets())  # fmt: skip

        stale = file_request(request(0))
        store.commit_chunk(SOURCE, TARGET, file_request(request(0)), 1)
        with pytest.raises(StaleChunk):
            store.commit_chunk(SOURCE, TARGET, stale, 1)  # its seqs are taken
        moved = dataclasses.replace(file_request(request(0)), start=0)
        with pytest.raises(StaleChunk):
            store.commit_chunk(SOURCE, TARGET, moved, 2)  # the position is 1 now
        assert store.summary()[TARGET.topic].pending == 1
    finally:
        store.close()


def test_a_chunk_filed_from_a_state_that_did_not_come_about_is_filed_again(
    tmp_path: Path,
) -> None:
    store = DelayStore(str(tmp_path / "delays"))
    try:
        later = dataclasses.replace(common(NOW + 20_000), offset=1)
        first = stamped(build_batch([common(NOW + 10_000), later]), 0, 0)
        second = stamped(build_batch([common(NOW + 15_000)]), 2, 0)
        ahead = ChunkRequest(second, [], SOURCE, 0, store.next_seq,
                             store.topic_id(TARGET.topic), NOW,
                             store.near_buckets())  # fmt: skip
        stale = file_request(ahead)  # as if it came first: seq 0, from position 0
        store.commit_chunk(SOURCE, TARGET, file_request(ahead._replace(data=first)), 2)
        ingest_commit(store, (ahead, stale), TARGET, 3)
        scheduled = store.peek(10)
        assert [(item.source_offset, item.seq) for item in scheduled] == [(0, 0), (2, 2), (1, 1)]
        assert store.position(SOURCE) == 3
    finally:
        store.close()


def test_the_worker_ends_when_the_broker_is_killed(tmp_path: Path) -> None:
    """A broker killed with SIGKILL leaves no worker behind: its pipe closes."""
    script = (
        "import os, signal, sys\n"
        "from kshim.broker.delay.chunk_worker import ChunkWorker\n"
        "from tests.broker.test_delay_chunks import large_request\n"
        "worker = ChunkWorker(min_bytes=1)\n"
        "worker.file(large_request())\n"
        "print(worker.process.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    # The worker's standard error is the broker's: not captured, or run() would wait for it.
    killed = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, timeout=60, check=False,
                            cwd=Path(__file__).parents[2])  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    child = int(killed.stdout.split()[0])
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, waiting for a parent that is gone, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
