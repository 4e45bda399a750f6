"""Delayed delivery through ``T.delay``: what a record asks for (requests.py), reading
``T.delay`` into the schedule (ingest.py), delivering due records to ``T`` exactly once
(dispatcher.py), the background job (runner.py), and what the handlers answer for a delay
companion. A real Broker over the in-memory log store with a fake clock; the background
steps are driven one at a time, and the runner only with bounded waits on conditions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kshim.api.admin import create_topics, delete_topics
from kshim.api.records import fetch, list_offsets, metadata
from kshim.api.records import produce as produce_api
from kshim.api.transactions import add_partitions_to_txn, end_txn, init_producer_id
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.validators import ConfigError
from kshim.broker.delay.chunk_worker import ChunkWorker
from kshim.broker.delay.dispatcher import (
    DELIVERY_BYTES,
    deliver_due,
    delivery_batch,
    settle_deliveries,
)
from kshim.broker.delay.ingest import CHUNK_BYTES, CHUNKS_PER_TURN, ingest_partition
from kshim.broker.delay.naming import (
    CANCEL_HEADER,
    DELAY_MS_HEADER,
    DELAYED_FROM_HEADER,
    DELIVER_AT_HEADER,
    REPLACE_HEADER,
)
from kshim.broker.delay.requests import (
    MAX_DUE_MS,
    DelayRequest,
    InvalidDelay,
    check_batch,
    read_request,
)
from kshim.broker.jobs.broker_jobs import delayed_delivery
from kshim.broker.retention import enforce_retention_once
from kshim.broker.topic_resolver import DeletablePartition
from kshim.broker.topics import TopicError
from kshim.protocol.compression import GZIP
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kshim.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kshim.protocol.messages.delete_topics import DeleteTopicsRequest
from kshim.protocol.messages.end_txn import EndTxnRequest
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kshim.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from kshim.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kshim.protocol.metadata_request import MetadataRequest
from kshim.protocol.packed_record import unpack_record
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.record_batch import (
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    iter_batches,
    read_header,
    validate_produced,
)
from kshim.protocol.records import (
    BatchSpec,
    Header,
    Record,
    build_batch,
    decode_records,
    iter_records,
)
from kshim.storage.interface import PartitionLog, TopicPartition
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.storage.schedule.delay_records import DelayedRecord, Turn
from kshim.storage.schedule.delay_store import DelayStore
from kshim.testing import FakeClock
from tests.broker.handler_calls import context, decoded
from tests.storage.support import read_everything

NOW = 1_700_000_000_000
FOREVER = (1 << 63) - 1
MAX_DELAY_MS = 2 * 365 * 24 * 3600 * 1000  # kshim.delay.max.ms by default
TOPIC, DELAY = "orders", "orders.delay"
T0, T1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
D0, D1 = TopicPartition(DELAY, 0), TopicPartition(DELAY, 1)
PLAIN = BatchSpec()
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 19, 20, 22, 24, 26
WAIT_S = 5.0  # bound on every wait for the background job


# -- a broker over the in-memory log store --------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


async def open_broker(data_dir: Path, clock: FakeClock, **settings: str) -> Broker:
    values = {"log.dirs": str(data_dir), "kshim.full.view.process": "false", **settings}
    broker = Broker(BrokerConfig.load([values]), clock=clock, logs=MemoryLogStore(clock))
    await broker.start()
    return broker


@pytest.fixture
async def broker(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Broker]:
    """A broker with ``orders`` (two partitions) and no delay companion yet."""
    opened = await open_broker(tmp_path, clock)
    await opened.topics.create(TOPIC, 2, {})
    yield opened
    await opened.close()


async def with_companion(broker: Broker, name: str = DELAY) -> None:
    assert await broker.resolver.create_companion(name) is not None


def store(broker: Broker) -> DelayStore:
    return broker.delays.store


def log_of(broker: Broker, topic_partition: TopicPartition) -> PartitionLog:
    partition_log = broker.topics.log(topic_partition)
    assert partition_log is not None
    return partition_log


# -- records --------------------------------------------------------------------------------


def at(due_ms: int) -> tuple[Header, ...]:
    return ((DELIVER_AT_HEADER, str(due_ms).encode()),)


def after(delay_ms: int) -> tuple[Header, ...]:
    return ((DELAY_MS_HEADER, str(delay_ms).encode()),)


def record(
    headers: tuple[Header, ...],
    value: bytes | None = b"v",
    key: bytes | None = b"k",
    timestamp: int = NOW,
) -> Record:
    """A record at offset 0 (``numbered`` gives a batch's records their offsets)."""
    return Record(0, timestamp, key, value, headers)


def numbered(*records: Record) -> list[Record]:
    """The records with offsets 0, 1, ... (one batch's offset deltas)."""
    return [
        Record(index, item.timestamp, item.key, item.value, item.headers)
        for index, item in enumerate(records)
    ]


async def append(
    broker: Broker, topic_partition: TopicPartition, records: list[Record], spec: BatchSpec = PLAIN
) -> int:
    """Appends one batch straight to the log, bypassing Produce's checks; returns its base
    offset once durable."""
    partition_log = log_of(broker, topic_partition)
    batch = build_batch(numbered(*records), spec)
    header = read_header(batch)
    offset = partition_log.append(batch, header)
    broker.transactions.partition(topic_partition).on_append(header, offset)
    await partition_log.wait_durable(offset + header.last_offset_delta)
    return offset


async def schedule(broker: Broker, topic_partition: TopicPartition, records: list[Record]) -> None:
    """Appends the records to the ``T.delay`` partition and reads them into the schedule."""
    await append(broker, topic_partition, records)
    while await ingest_partition(broker, topic_partition):
        pass


def pending(broker: Broker) -> list[tuple[int, TopicPartition, int]]:
    return [(r.due_ms, r.target, r.source_offset) for r in store(broker).peek(1 << 20)]


def pending_counts(broker: Broker) -> dict[str, int]:
    """Pending records per topic, as the store counts them (topics with none left out)."""
    summaries = store(broker).summary().items()
    return {topic: summary.pending for topic, summary in summaries if summary.pending}


Batch = tuple[BatchHeader, list[Record]]


async def batches(broker: Broker, topic_partition: TopicPartition) -> list[Batch]:
    data = await read_everything(log_of(broker, topic_partition))
    return [
        decode_records(data[position : position + header.size])
        for position, header in iter_batches(data)
    ]


async def values(broker: Broker, topic_partition: TopicPartition) -> list[bytes | None]:
    data = await read_everything(log_of(broker, topic_partition))
    return [item.value for item in iter_records(data)]


# -- requests through the handlers ----------------------------------------------------------


async def produce(
    broker: Broker,
    topic_partition: TopicPartition,
    records: list[Record],
    spec: BatchSpec = PLAIN,
    transactional_id: str | None = None,
) -> Any:
    """Produce (v9) of one batch; the partition's answer."""
    batch = memoryview(build_batch(numbered(*records), spec))
    partition_data = PartitionData(topic_partition.partition, batch)
    topic_data = (TopicData(topic_partition.topic, (partition_data,)),)
    request = ProduceRequest(transactional_id, -1, 5000, topic_data)
    answer = await produce_api.handle(request, context(broker, PRODUCE, 9))
    [topic] = decoded(PRODUCE, 9, answer).responses
    [result] = topic.partition_responses
    return result


async def metadata_topics(broker: Broker, names: tuple[str, ...] | None) -> list[Any]:
    request = MetadataRequest(topics=names, allow_auto_topic_creation=False)
    parts = await metadata.handle(request, context(broker, METADATA, 12))
    return list(decoded(METADATA, 12, parts).topics)


async def begin_transaction(
    broker: Broker, transactional_id: str, topic_partition: TopicPartition
) -> InitProducerIdResponse:
    init = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000)
    producer = await init_producer_id.handle(init, context(broker, INIT_PRODUCER_ID, 4))
    assert producer.error_code == ErrorCode.none
    topics = [
        AddPartitionsToTxnTopic(name=topic_partition.topic, partitions=[topic_partition.partition])
    ]
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer.producer_id,
        v3_and_below_producer_epoch=producer.producer_epoch,
        v3_and_below_topics=topics,
    )
    added = await add_partitions_to_txn.handle(add, context(broker, ADD_PARTITIONS, 3))
    [topic] = added.results_by_topic_v3_and_below
    assert [result.partition_error_code for result in topic.results_by_partition] == [0]
    return producer


def transactional(producer: InitProducerIdResponse) -> BatchSpec:
    return BatchSpec(
        attributes=TRANSACTIONAL_FLAG_MASK,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=0,
    )


async def end_transaction(
    broker: Broker, transactional_id: str, producer: InitProducerIdResponse, commit: bool
) -> None:
    end = EndTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        committed=commit,
    )
    assert (await end_txn.handle(end, context(broker, END_TXN, 3))).error_code == ErrorCode.none


async def transaction(
    broker: Broker, transactional_id: str, records: list[Record], commit: bool
) -> None:
    """A transaction writing ``records`` to partition 0 of ``T.delay``, then ended."""
    producer = await begin_transaction(broker, transactional_id, D0)
    written = await produce(broker, D0, records, transactional(producer), transactional_id)
    assert written.error_code == ErrorCode.none
    await end_transaction(broker, transactional_id, producer, commit)


@contextlib.asynccontextmanager
async def running(broker: Broker) -> AsyncIterator[asyncio.Task[None]]:
    """The delayed delivery job, running for the block and cancelled after it."""
    task = asyncio.create_task(delayed_delivery(broker).run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def spy_next_wake(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """Every answer of the store's ``next_wake``: the job asks once per round, as its last
    look at the store before it sleeps (so the test itself never opens the store while
    the job's threads may)."""
    seen: list[int | None] = []
    next_wake = store(broker).next_wake

    def spied() -> int | None:
        answer = next_wake()
        seen.append(answer)
        return answer

    monkeypatch.setattr(store(broker), "next_wake", spied)
    return seen


def delay_log(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [entry for entry in caplog.records if entry.name.startswith("kshim.broker.delay")]


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Waits (at most WAIT_S) until ``condition`` holds, looking every few milliseconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        if condition():
            return
        if loop.time() > deadline:
            pytest.fail(f"not within {WAIT_S} s: {what}")
        await asyncio.sleep(0.005)


# == requests: what a record asks for =======================================================


def test_deliver_at_is_the_due_time() -> None:
    assert read_request(record(at(NOW + 5))) == DelayRequest(NOW + 5, cancels=False)


def test_delay_ms_counts_from_the_record_timestamp() -> None:
    late = record(after(300), timestamp=NOW - 1000)
    assert read_request(late) == DelayRequest(NOW - 700, cancels=False)


def test_deliver_at_and_delay_ms_together_are_refused() -> None:
    with pytest.raises(InvalidDelay, match=f"{DELIVER_AT_HEADER} or {DELAY_MS_HEADER}, not both"):
        read_request(record(at(NOW) + after(10)))


def test_a_record_asking_for_no_delay_is_refused() -> None:
    with pytest.raises(InvalidDelay, match=DELIVER_AT_HEADER) as refused:
        read_request(record((("trace", b"x"),)))
    assert DELAY_MS_HEADER in str(refused.value) and CANCEL_HEADER in str(refused.value)


@pytest.mark.parametrize("header", [DELIVER_AT_HEADER, DELAY_MS_HEADER])
@pytest.mark.parametrize(
    "value", [b"soon", b"-5", b"1.5", b"+5", b"1e3", b"", None, "\u0663".encode()]
)
def test_a_due_time_that_is_no_non_negative_whole_number_is_refused(
    header: str, value: bytes | None
) -> None:
    with pytest.raises(InvalidDelay, match=f"{header} must be a non-negative whole number"):
        read_request(record(((header, value),)))


def test_a_cancel_with_a_key_cancels_and_is_not_delivered() -> None:
    assert read_request(record(((CANCEL_HEADER, b""),))) == DelayRequest(None, cancels=True)


def test_a_replace_with_a_key_is_scheduled_and_cancels() -> None:
    replacing = record((*at(NOW + 1), (REPLACE_HEADER, b"")))
    assert read_request(replacing) == DelayRequest(NOW + 1, cancels=True)


@pytest.mark.parametrize("header", [CANCEL_HEADER, REPLACE_HEADER])
def test_cancel_and_replace_need_a_key(header: str) -> None:
    with pytest.raises(InvalidDelay, match=f"{header} needs a record key"):
        read_request(record((*at(NOW), (header, b"")), key=None))


def outcome(headers: tuple[Header, ...]) -> DelayRequest | str:
    try:
        return read_request(record(headers))
    except InvalidDelay as error:
        return str(error)


@given(
    st.one_of(
        st.integers(min_value=0, max_value=(1 << 64)).map(lambda due: str(due).encode()),
        st.integers(min_value=10**17, max_value=10**20).map(lambda due: str(due).encode()),
        st.binary(max_size=21),
        st.from_regex(rb"\A\s*[0-9]{1,20}\s*\Z"),
        st.none(),
    )
)
@example(str(MAX_DUE_MS).encode())
@example(str(MAX_DUE_MS + 1).encode())
@example(b"9" * 19)
def test_a_lone_due_time_reads_as_it_does_among_other_headers(value: bytes | None) -> None:
    # A record whose only header is kshim-deliver-at is read by a shortcut: it must give
    # what the full rules give when another header makes them run.
    assert outcome(((DELIVER_AT_HEADER, value),)) == outcome(
        (("trace", b"x"), (DELIVER_AT_HEADER, value))
    )


def check(records: list[Record], spec: BatchSpec = PLAIN, max_delay_ms: int = 1000) -> str | None:
    return check_batch(memoryview(build_batch(numbered(*records), spec)), NOW, max_delay_ms)


def test_check_batch_accepts_a_due_time_exactly_max_delay_ahead() -> None:
    assert check([record(at(NOW + 1000)), record(after(1000))]) is None


def test_check_batch_refuses_a_due_time_one_ms_past_max_delay() -> None:
    refusal = check([record(at(NOW)), record(at(NOW + 1001))])
    assert refusal is not None
    assert refusal.startswith("record at offset delta 1: due at")
    assert "kshim.delay.max.ms=1000" in refusal
    assert check([record(after(1001))]) is not None


def test_check_batch_accepts_due_times_in_the_past_and_cancels() -> None:
    assert check([record(at(0)), record(((CANCEL_HEADER, None),))]) is None


def test_check_batch_names_the_header_and_the_record() -> None:
    refusal = check([record(at(NOW)), record(at(NOW)), record(((CANCEL_HEADER, b""),), key=None)])
    assert refusal is not None
    assert refusal.startswith("record at offset delta 2: ")
    assert CANCEL_HEADER in refusal


def test_check_batch_reads_the_records_of_a_gzip_batch() -> None:
    gzip = BatchSpec(attributes=GZIP)
    assert check([record(at(NOW + i), value=b"x" * 100) for i in range(3)], gzip) is None
    refusal = check([record(at(NOW)), record(after(5) + at(NOW))], gzip)
    assert refusal is not None
    assert "offset delta 1" in refusal and "not both" in refusal
    assert check([record(at(NOW + 1001))], gzip) is not None


def test_check_batch_refuses_records_it_cannot_read() -> None:
    batch = bytearray(build_batch([record(at(NOW))], BatchSpec(attributes=GZIP)))
    batch[-8:] = b"\xff" * 8  # the gzip stream damaged (the CRC is not check_batch's to check)
    refusal = check_batch(memoryview(batch), NOW, 1000)
    assert refusal is not None and refusal.startswith("cannot read the records")


# == ingest: T.delay into the schedule ======================================================


async def test_ingest_schedules_records_for_the_same_partition_of_the_target(
    broker: Broker,
) -> None:
    await with_companion(broker)
    await append(broker, D1, [record(at(NOW + 50)), record(after(20), timestamp=NOW - 5)])
    assert await ingest_partition(broker, D1)
    assert pending(broker) == [(NOW + 15, T1, 1), (NOW + 50, T1, 0)]
    assert store(broker).position(D1) == 2
    assert store(broker).position(D0) == 0


async def test_the_scheduled_record_is_the_record_as_produced(broker: Broker) -> None:
    await with_companion(broker)
    headers = (*at(NOW), ("trace", b"abc"), ("empty", None))
    await append(broker, D0, [record(at(NOW), value=b"first"), record(headers, b"second", b"id")])
    await ingest_partition(broker, D0)
    [_, second] = store(broker).peek(10)
    stored = unpack_record(second.packed, second.source_offset)
    assert (stored.offset, stored.timestamp, stored.key, stored.value, stored.headers) == (
        1, NOW, b"id", b"second", headers,
    )  # fmt: skip
    assert second.key == b"id"


async def test_a_second_ingest_reads_nothing_new(broker: Broker) -> None:
    await with_companion(broker)
    await append(broker, D0, [record(at(NOW)), record(at(NOW + 1))])
    assert await ingest_partition(broker, D0)
    assert not await ingest_partition(broker, D0)
    assert store(broker).position(D0) == 2
    assert len(pending(broker)) == 2
    await append(broker, D0, [record(at(NOW + 2))])
    assert await ingest_partition(broker, D0)
    assert store(broker).position(D0) == 3
    assert [offset for _, _, offset in pending(broker)] == [0, 1, 2]


async def test_ingest_of_a_partition_never_written_creates_no_store(
    broker: Broker, tmp_path: Path
) -> None:
    await with_companion(broker)
    assert not await ingest_partition(broker, D0)
    assert not await ingest_partition(broker, T0)  # no companion's: nothing to read
    assert not (tmp_path / "delays").exists()


async def test_cancel_and_replace_by_key_apply_in_offset_order(broker: Broker) -> None:
    await with_companion(broker)
    cancel_a = record(((CANCEL_HEADER, b""),), key=b"a")
    replace_b = record((*at(NOW + 9), (REPLACE_HEADER, b"")), b"b2", b"b")
    await append(broker, D0, [record(at(NOW + 1), b"a1", b"a"), record(at(NOW + 2), b"b1", b"b")])
    await append(broker, D1, [record(at(NOW + 3), b"a2", b"a")])
    await schedule(broker, D0, [cancel_a, replace_b])
    while await ingest_partition(broker, D1):
        pass
    # The cancel (offset 2 of partition 0) came before a2 was read: a2 stays pending.
    assert pending(broker) == [(NOW + 3, T1, 0), (NOW + 9, T0, 3)]


async def test_ingest_skips_aborted_transactions_and_markers(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    await with_companion(broker)
    with caplog.at_level(logging.WARNING, logger="kshim.broker.delay"):
        await transaction(broker, "committed", [record(at(NOW + 1), b"kept")], commit=True)
        await transaction(broker, "aborted", [record(at(NOW + 2), b"dropped")], commit=False)
        await produce(broker, D0, [record(at(NOW + 3), b"plain")])
        assert await ingest_partition(broker, D0)
    # committed record, COMMIT marker, aborted record, ABORT marker, plain record
    assert store(broker).position(D0) == log_of(broker, D0).high_watermark == 5
    assert pending(broker) == [(NOW + 1, T0, 0), (NOW + 3, T0, 4)]
    assert delay_log(caplog) == []  # the markers were skipped, not read as records


async def test_ingest_waits_for_an_open_transaction(broker: Broker) -> None:
    await with_companion(broker)
    producer = await begin_transaction(broker, "open", D0)
    written = await produce(broker, D0, [record(at(NOW), b"t")], transactional(producer), "open")
    assert written.error_code == ErrorCode.none
    await produce(broker, D0, [record(at(NOW), b"after")])
    assert not await ingest_partition(broker, D0)  # the last stable offset is 0
    assert pending(broker) == []
    await end_transaction(broker, "open", producer, commit=True)
    assert await ingest_partition(broker, D0)
    assert [offset for _, _, offset in pending(broker)] == [0, 1]


async def test_invalid_records_in_the_log_are_skipped_with_a_warning(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    await with_companion(broker)
    await append(
        broker,
        D0,
        [
            record(at(NOW), b"good"),
            record(()),
            record(at(NOW) + after(1)),
            record(((CANCEL_HEADER, b""),), key=None),
            record(((DELIVER_AT_HEADER, b"later"),)),
            record(after(2), b"also good"),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="kshim.broker.delay"):
        assert await ingest_partition(broker, D0)
    assert pending(broker) == [(NOW, T0, 0), (NOW + 2, T0, 5)]
    assert store(broker).position(D0) == 6
    warned = delay_log(caplog)
    assert [entry.levelno for entry in warned] == [logging.WARNING] * 4
    for entry, offset in zip(warned, (1, 2, 3, 4), strict=True):
        assert f"record {offset} of its delay topic not scheduled" in entry.getMessage()


# == dispatch: due records into T ===========================================================


async def test_nothing_is_delivered_before_its_due_time(broker: Broker, clock: FakeClock) -> None:
    await with_companion(broker)
    await schedule(broker, D0, [record(at(NOW + 100), b"later")])
    clock.now_ms = NOW + 99
    assert await deliver_due(broker) == 0
    assert log_of(broker, T0).high_watermark == 0
    clock.now_ms = NOW + 100
    assert await deliver_due(broker) == 1
    assert await values(broker, T0) == [b"later"]
    assert await deliver_due(broker) == 0
    assert pending(broker) == []
    assert not store(broker).turn_under_way
    assert pending_counts(broker) == {}


async def test_due_order_is_kept_per_partition(broker: Broker, clock: FakeClock) -> None:
    await with_companion(broker)
    await schedule(
        broker,
        D0,
        [record(at(NOW + 30), b"a"), record(at(NOW + 10), b"b"), record(at(NOW + 20), b"c")],
    )
    await schedule(broker, D1, [record(at(NOW + 15), b"x"), record(at(NOW + 5), b"y")])
    clock.now_ms = NOW + 20
    assert await deliver_due(broker) == 4
    assert await values(broker, T0) == [b"b", b"c"]
    assert await values(broker, T1) == [b"y", b"x"]
    clock.now_ms = NOW + 30
    assert await deliver_due(broker) == 1
    assert await values(broker, T0) == [b"b", b"c", b"a"]


async def test_delivered_batch_keeps_each_record_and_says_where_it_came_from(
    broker: Broker, clock: FakeClock
) -> None:
    await with_companion(broker)
    await append(broker, T1, [record((), b"already there")])
    kept: tuple[Header, ...] = (("trace", b"abc"), ("empty", None))
    await schedule(
        broker,
        D1,
        [
            record(at(NOW + 500), b"not yet"),
            record(at(NOW + 2) + kept, b"one", b"k1", timestamp=NOW - 7),
            record(after(3), None, None, timestamp=NOW - 1),
        ],
    )
    clock.now_ms = NOW + 2
    assert await deliver_due(broker) == 2
    [_, (header, delivered)] = await batches(broker, T1)
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (1, 2, 1)
    assert (header.producer_id, header.is_transactional, header.is_control) == (-1, False, False)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in delivered] == [
        (1, NOW - 7, b"k1", b"one"),
        (2, NOW - 1, None, None),
    ]
    assert delivered[0].headers == (*at(NOW + 2), *kept, (DELAYED_FROM_HEADER, b"1:1"))
    assert delivered[1].headers == (*after(3), (DELAYED_FROM_HEADER, b"1:2"))
    assert log_of(broker, T1).high_watermark == 3


async def test_a_log_append_time_topic_gets_the_delivery_time(
    broker: Broker, clock: FakeClock
) -> None:
    await broker.topics.create("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
    await with_companion(broker, "stamped.delay")
    source = TopicPartition("stamped.delay", 0)
    await schedule(broker, source, [record(at(NOW + 10), b"a", timestamp=NOW - 500)])
    clock.now_ms = NOW + 25
    assert await deliver_due(broker) == 1
    [(header, [delivered])] = await batches(broker, TopicPartition("stamped", 0))
    assert header.attributes & TIMESTAMP_TYPE_MASK
    assert (delivered.timestamp, header.max_timestamp, delivered.value) == (
        NOW + 25,
        NOW + 25,
        b"a",
    )


async def test_a_large_delivery_is_split_into_several_batches(
    broker: Broker, clock: FakeClock
) -> None:
    await with_companion(broker)
    big = DELIVERY_BYTES * 2 // 5
    records = [record(at(NOW), bytes([index]) * big) for index in range(5)]
    for item in records:  # one batch each: far below any size limit of T.delay
        await append(broker, D0, [item])
    while await ingest_partition(broker, D0):
        pass
    assert await deliver_due(broker) == 5
    found = await batches(broker, T0)
    assert len(found) >= 3
    assert all(header.size <= DELIVERY_BYTES + 4096 for header, _ in found)
    delivered = [item for _, part in found for item in part]
    assert [item.offset for item in delivered] == [0, 1, 2, 3, 4]
    assert [item.value for item in delivered] == [item.value for item in records]
    assert [dict(item.headers)[DELAYED_FROM_HEADER] for item in delivered] == [
        f"0:{offset}".encode() for offset in range(5)
    ]


async def test_records_for_a_deleted_target_are_dropped_not_delivered(broker: Broker) -> None:
    await with_companion(broker)
    await schedule(broker, D0, [record(at(NOW))])
    await broker.topics.delete(TOPIC)  # gone without DeleteTopics' clean-up
    assert await deliver_due(broker) == 1
    assert pending(broker) == []
    assert not store(broker).turn_under_way


# == exactly once across a stop in the middle of a delivery =================================


async def due_in_t0(broker: Broker, *items: bytes) -> Turn:
    """Schedules one record per value for partition 0, all due now, and takes them off
    the schedule as the dispatcher does."""
    await with_companion(broker)
    await schedule(broker, D0, [record(at(NOW), value) for value in items])
    store(broker).maintain(NOW)
    due = store(broker).take_due(NOW, 100)
    assert len(due.records) == len(items)
    return due


def note(broker: Broker, turn: Turn) -> None:
    """What the dispatcher notes before it appends ``turn``'s records to T0."""
    turn.from_offsets[T0] = log_of(broker, T0).log_end_offset
    store(broker).begin_turn(turn)


async def append_delivery(broker: Broker, records: list[DelayedRecord]) -> None:
    """What ``_deliver`` appends for ``records``, made durable."""
    partition_log = log_of(broker, T0)
    batch = bytearray(delivery_batch(records))
    header = validate_produced(batch)
    offset = partition_log.append(batch, header)
    await partition_log.wait_durable(offset + header.last_offset_delta)


async def test_a_noted_delivery_that_never_reached_the_target_is_delivered_at_start(
    broker: Broker,
) -> None:
    due = await due_in_t0(broker, b"a", b"b")
    await append(broker, T0, [record((), b"other producer")])
    note(broker, due)
    # power cut: the append was never durable, so T holds nothing of it
    await settle_deliveries(broker)
    assert not store(broker).turn_under_way
    assert pending(broker) == []
    assert store(broker).summary()[TOPIC].delivered == 2
    assert await deliver_due(broker) == 0
    assert await values(broker, T0) == [b"other producer", b"a", b"b"]


async def test_a_noted_delivery_found_in_the_target_is_finished_not_redelivered(
    broker: Broker,
) -> None:
    due = await due_in_t0(broker, b"a", b"b")
    await append(broker, T0, [record((), b"before")])
    note(broker, due)
    await append(broker, T0, [record((), b"another producer")])
    await append_delivery(broker, due.records)
    # kill -9: finish_turn never ran
    await settle_deliveries(broker)
    assert not store(broker).turn_under_way
    assert pending(broker) == []
    assert pending_counts(broker) == {}
    assert store(broker).summary()[TOPIC].delivered == 2  # counted, as delivered by now
    assert await deliver_due(broker) == 0
    assert await values(broker, T0) == [b"before", b"another producer", b"a", b"b"]


async def test_a_partly_arrived_delivery_delivers_only_the_missing_records(
    broker: Broker,
) -> None:
    due = await due_in_t0(broker, b"a", b"b", b"c")
    note(broker, due)
    await append_delivery(broker, [due.records[0], due.records[2]])
    await settle_deliveries(broker)
    assert not store(broker).turn_under_way
    assert pending(broker) == []
    assert store(broker).summary()[TOPIC].delivered == 3
    assert await deliver_due(broker) == 0
    assert await values(broker, T0) == [b"a", b"c", b"b"]


async def test_a_delivery_found_before_the_noted_offset_does_not_count(broker: Broker) -> None:
    """Only what T holds from the noted offset on arrived with this delivery."""
    due = await due_in_t0(broker, b"a")
    await append_delivery(broker, due.records)  # an identical batch, before the note
    note(broker, due)
    await settle_deliveries(broker)
    assert pending(broker) == []
    assert await values(broker, T0) == [b"a", b"a"]


async def test_a_turn_that_failed_after_its_append_is_finished_not_repeated(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await with_companion(broker)
    await schedule(broker, D0, [record(at(NOW), b"a"), record(at(NOW), b"b")])
    finish = store(broker).finish_turn
    monkeypatch.setattr(store(broker), "finish_turn", failing(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        await deliver_due(broker)
    monkeypatch.setattr(store(broker), "finish_turn", finish)
    assert await deliver_due(broker) == 0  # the failed turn is finished first
    assert await values(broker, T0) == [b"a", b"b"]
    assert pending(broker) == [] and pending_counts(broker) == {}
    assert not store(broker).turn_under_way


async def test_a_turn_that_failed_before_its_note_is_delivered_by_the_next(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await with_companion(broker)
    await schedule(broker, D0, [record(at(NOW), b"a")])
    begin = store(broker).begin_turn
    monkeypatch.setattr(store(broker), "begin_turn", failing(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        await deliver_due(broker)
    monkeypatch.setattr(store(broker), "begin_turn", begin)
    assert await deliver_due(broker) == 1
    assert await values(broker, T0) == [b"a"]


def failing(error: Exception) -> Callable[..., None]:
    def fail(*_: object) -> None:
        raise error

    return fail


async def test_the_delay_job_settles_a_delivery_under_way_before_anything_else(
    broker: Broker,
) -> None:
    due = await due_in_t0(broker, b"a", b"b")
    note(broker, due)
    await append_delivery(broker, due.records[:1])
    async with running(broker):
        # The turn is finished (its note cleared) just after its append: both are awaited
        # before the job is cancelled, since a job cancelled mid-turn marks the turn under
        # way again, to be settled from disk before its next one.
        await eventually(
            lambda: log_of(broker, T0).high_watermark == 2 and not store(broker).turn_under_way,
            "b delivered and the turn finished",
        )
    assert await values(broker, T0) == [b"a", b"b"]
    assert pending(broker) == []


# == the handlers and a delay companion =====================================================


async def test_produce_of_an_invalid_delay_record_is_refused_and_appends_nothing(
    broker: Broker,
) -> None:
    await with_companion(broker)
    result = await produce(broker, D0, [record(at(NOW)), record((("trace", b"x"),))])
    assert result.error_code == ErrorCode.invalid_record
    assert result.error_message.startswith("record at offset delta 1: ")
    assert DELIVER_AT_HEADER in result.error_message
    assert log_of(broker, D0).log_end_offset == 0
    too_far = await produce(broker, D0, [record(at(NOW + MAX_DELAY_MS + 1))])
    assert too_far.error_code == ErrorCode.invalid_record
    assert "kshim.delay.max.ms" in too_far.error_message
    assert log_of(broker, D0).log_end_offset == 0
    written = await produce(broker, D0, [record(at(NOW + MAX_DELAY_MS))])
    assert (written.error_code, written.base_offset) == (ErrorCode.none, 0)


async def test_produce_to_the_target_is_not_checked_for_delay_headers(broker: Broker) -> None:
    written = await produce(broker, T0, [record(at(NOW) + after(1))])
    assert written.error_code == ErrorCode.none


async def test_produce_to_a_delay_companion_is_delivered_by_the_runner(
    broker: Broker, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    await with_companion(broker)
    written = await produce(broker, D1, [record(after(10), b"soon")])
    assert written.error_code == ErrorCode.none
    seen = spy_next_wake(broker, monkeypatch)
    async with running(broker):
        await eventually(lambda: NOW + 10 in seen, "the record read into the schedule")
        assert log_of(broker, T1).high_watermark == 0
        clock.advance(10)
        broker.delays.wake_up.set()
        await eventually(lambda: log_of(broker, T1).high_watermark == 1, "its delivery")
    assert await values(broker, T1) == [b"soon"]
    assert pending(broker) == []


async def test_fetch_and_list_offsets_of_a_delay_companion_are_invalid_topic(
    broker: Broker,
) -> None:
    await with_companion(broker)
    await produce(broker, D0, [record(at(NOW))])
    wanted_fetch = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    request_fetch = FetchRequest(topics=[FetchTopic(topic=DELAY, partitions=[wanted_fetch])])
    fetched = await fetch.handle(request_fetch, context(broker, FETCH, 12))
    [topic] = decoded(FETCH, 12, fetched).responses
    [partition] = topic.partitions
    assert partition.error_code == ErrorCode.invalid_topic_exception
    assert not partition.records
    wanted = [ListOffsetsPartition(partition_index=0, timestamp=-1)]
    request = ListOffsetsRequest(topics=[ListOffsetsTopic(name=DELAY, partitions=wanted)])
    listed = await list_offsets.handle(request, context(broker, LIST_OFFSETS, 9))
    [answer] = listed.topics[0].partitions
    assert answer.error_code == ErrorCode.invalid_topic_exception


async def test_metadata_for_all_topics_leaves_the_delay_companion_out(broker: Broker) -> None:
    await with_companion(broker)
    listed = await metadata_topics(broker, None)
    assert [(topic.name, topic.error_code) for topic in listed] == [(TOPIC, ErrorCode.none)]


async def test_metadata_naming_a_delay_companion_creates_and_answers_it(broker: Broker) -> None:
    assert broker.resolver.resolve(DELAY) is None
    [answer] = await metadata_topics(broker, (DELAY,))  # auto-creation not even allowed
    assert (answer.name, answer.error_code) == (DELAY, ErrorCode.none)
    assert sorted(partition.partition_index for partition in answer.partitions) == [0, 1]
    resolved = broker.resolver.resolve(DELAY)
    assert resolved is not None and resolved.partition_count == 2
    [again] = await metadata_topics(broker, (DELAY,))
    assert again.error_code == ErrorCode.none and again.topic_id == answer.topic_id


async def test_metadata_naming_the_companion_of_no_topic_answers_unknown(broker: Broker) -> None:
    for name in ("nope.delay", DELAY + ".delay"):
        [answer] = await metadata_topics(broker, (name,))
        assert answer.error_code == ErrorCode.unknown_topic_or_partition
        assert broker.resolver.resolve(name) is None


async def test_create_topics_refuses_delay_names(broker: Broker) -> None:
    topics = [
        CreatableTopic(name=name, num_partitions=1, replication_factor=1)
        for name in ("x.delay", DELAY)
    ]
    request = CreateTopicsRequest(topics=topics)
    response = await create_topics.handle(request, context(broker, CREATE_TOPICS, 7))
    for answer in response.topics:
        assert answer.error_code == ErrorCode.policy_violation
        assert answer.error_message is not None and ".delay" in answer.error_message
    assert broker.resolver.resolve("x.delay") is None
    assert broker.resolver.resolve(DELAY) is None


async def delete(broker: Broker, name: str) -> Any:
    request = DeleteTopicsRequest(topic_names=[name])
    response = await delete_topics.handle(request, context(broker, DELETE_TOPICS, 5))
    [answer] = response.responses
    return answer


async def test_delete_topics_refuses_the_delay_companion(broker: Broker) -> None:
    await with_companion(broker)
    answer = await delete(broker, DELAY)
    assert answer.error_code == ErrorCode.policy_violation
    assert answer.error_message == (
        f"{DELAY} is the write-only delay companion of {TOPIC}; delete its topic instead"
    )
    assert broker.resolver.resolve(DELAY) is not None


async def test_delete_topics_of_the_target_removes_its_companion_and_pending_records(
    broker: Broker,
) -> None:
    await with_companion(broker)
    await broker.topics.create("other", 1, {})
    await with_companion(broker, "other.delay")
    await schedule(broker, D0, [record(at(NOW + 5))])
    await schedule(broker, D1, [record(at(NOW + 6))])
    await schedule(broker, TopicPartition("other.delay", 0), [record(at(NOW + 7))])
    assert (await delete(broker, TOPIC)).error_code == ErrorCode.none
    assert broker.resolver.resolve(TOPIC) is None
    assert broker.resolver.resolve(DELAY) is None
    assert pending(broker) == [(NOW + 7, TopicPartition("other", 0), 0)]
    assert store(broker).position(D0) == 0 and store(broker).position(D1) == 0
    assert pending_counts(broker) == {"other": 1}
    assert "orders" not in store(broker).summary()


# == retention of T.delay ====================================================================


def deletable(broker: Broker, topic_partition: TopicPartition) -> DeletablePartition:
    [found] = [
        partition
        for partition in broker.resolver.deletable_partitions()
        if partition.log.topic_partition == topic_partition
    ]
    return found


async def test_the_delay_log_start_is_held_at_the_schedule_position(broker: Broker) -> None:
    await with_companion(broker)
    await append(broker, D0, [record(at(NOW)), record(at(NOW))])
    await append(broker, D0, [record(at(NOW))])
    assert await deletable(broker, D0).log_start_limit() == 0
    await ingest_partition(broker, D0)
    assert await deletable(broker, D0).log_start_limit() == 3
    assert await deletable(broker, D1).log_start_limit() == 0


async def test_delete_records_of_a_delay_companion_is_refused(broker: Broker) -> None:
    await with_companion(broker)
    with pytest.raises(TopicError) as refused:
        broker.resolver.deletable_partition(D0)
    assert refused.value.code == ErrorCode.policy_violation


async def test_retention_never_drops_delay_records_not_yet_scheduled(
    tmp_path: Path, clock: FakeClock
) -> None:
    small = {"log.segment.bytes": "200", "log.retention.ms": "1000"}
    broker = await open_broker(tmp_path, clock, **small)
    try:
        await broker.topics.create(TOPIC, 1, {})
        await with_companion(broker)
        for index in range(4):  # one segment each
            await append(broker, D0, [record(at(NOW + 1), bytes([index]) * 150)])
        clock.advance(10_000)
        await enforce_retention_once(broker)
        assert log_of(broker, D0).log_start_offset == 0
        while await ingest_partition(broker, D0):  # a segment at a time
            pass
        assert [offset for _, _, offset in pending(broker)] == [0, 1, 2, 3]
        await enforce_retention_once(broker)
        assert 0 < log_of(broker, D0).log_start_offset <= store(broker).position(D0) == 4
    finally:
        await broker.close()


async def test_a_backlog_is_read_a_turn_of_chunks_at_a_time_through_the_worker(
    tmp_path: Path, clock: FakeClock
) -> None:
    broker = await open_broker(tmp_path, clock)
    broker.delays.chunk_worker = ChunkWorker(min_bytes=1)  # every chunk filed in the child
    try:
        await broker.topics.create(TOPIC, 1, {})
        await with_companion(broker)
        batches, per_batch = CHUNKS_PER_TURN + 2, 4
        for index in range(batches):  # a batch longer than a chunk: a chunk each
            large = bytes([index]) * (CHUNK_BYTES // per_batch)
            records = [record(at(NOW + 1000 * index + slot), large) for slot in range(per_batch)]
            await append(broker, D0, records)
        assert await ingest_partition(broker, D0)
        assert store(broker).position(D0) == per_batch * CHUNKS_PER_TURN
        assert await ingest_partition(broker, D0)
        assert not await ingest_partition(broker, D0)
        scheduled = store(broker).peek(1 << 20)
        assert [item.source_offset for item in scheduled] == list(range(per_batch * batches))
        assert [item.seq for item in scheduled] == list(range(per_batch * batches))
        assert broker.delays.chunk_worker.started == 1
    finally:
        await broker.close()


# == the runner ===============================================================================


async def test_the_delay_job_creates_nothing_when_nothing_is_delayed(
    broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await produce(broker, T0, [record((), b"plain")])
    seen = spy_next_wake(broker, monkeypatch)
    async with running(broker) as task:
        await eventually(lambda: len(seen) >= 1, "a first round of the job")
        broker.delays.notify(T0)  # a wake-up for a partition with nothing to delay
        await eventually(lambda: len(seen) >= 2, "a second round of the job")
        assert not task.done()
    assert seen[:2] == [None, None]
    assert not (tmp_path / "delays").exists()
    assert not store(broker).exists


# == due times the schedule cannot order ===================================================


async def test_a_delay_relative_to_no_timestamp_is_refused(broker: Broker) -> None:
    """A record without a timestamp (-1) has nothing for kshim-delay-ms to count from: its
    due time would be in 1970 and sort after every real one in the schedule's keys."""
    await with_companion(broker)
    untimed = await produce(broker, D0, [record(after(0), b"untimed", timestamp=-1)])
    assert untimed.error_code == ErrorCode.invalid_record
    assert untimed.error_message is not None and DELIVER_AT_HEADER in untimed.error_message
    assert pending(broker) == []


@pytest.mark.parametrize("header", [DELIVER_AT_HEADER, DELAY_MS_HEADER])
def test_thousands_of_digits_are_refused_as_out_of_range(header: str) -> None:
    # Past 4,300 digits int() raises a plain ValueError (CPython's limit on conversions),
    # which would escape the checks that catch InvalidDelay.
    with pytest.raises(InvalidDelay, match="largest"):
        read_request(record(((header, b"1" * 5000),)))
    assert "largest" in (check([record(((header, b"1" * 5000),))]) or "")


def test_a_due_time_beyond_int64_is_invalid() -> None:
    with pytest.raises(InvalidDelay, match="largest"):
        read_request(record(at(1 << 63)))
    assert read_request(record(at(FOREVER))).due_ms == FOREVER


async def test_the_largest_max_delay_still_refuses_what_does_not_fit(
    tmp_path: Path, clock: FakeClock
) -> None:
    """kshim.delay.max.ms may be a century at most, so now + max always fits in 64 bits;
    a deliver-at past 2**63 is refused, and the schedule goes on with the next record."""
    century = str(100 * 365 * 24 * 3600 * 1000)
    broker = await open_broker(tmp_path, clock, **{"kshim.delay.max.ms": century})
    try:
        await broker.topics.create(TOPIC, 1, {})
        await with_companion(broker)
        beyond = await produce(broker, D0, [record(at(1 << 63), b"beyond")])
        assert beyond.error_code == ErrorCode.invalid_record
        await produce(broker, D0, [record(at(NOW), b"good")])
        while await ingest_partition(broker, D0):
            pass
        assert pending(broker) == [(NOW, T0, 0)]
    finally:
        await broker.close()


def test_a_max_delay_past_a_century_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kshim\.delay\.max\.ms"):
        BrokerConfig.load([{"log.dirs": str(tmp_path), "kshim.delay.max.ms": str(FOREVER)}])


async def test_a_chunk_read_while_its_delay_topic_is_deleted_is_not_scheduled(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await with_companion(broker)
    await append(broker, D0, [record(at(NOW + 10))])
    delay_log = log_of(broker, D0)
    read = delay_log.read

    async def read_then_delete(*args: Any, **kwargs: Any) -> Any:
        result = await read(*args, **kwargs)
        await broker.topics.delete(D0.topic)  # DeleteTopics while the chunk is in hand
        return result

    monkeypatch.setattr(delay_log, "read", read_then_delete)
    assert not await ingest_partition(broker, D0)
    assert pending(broker) == []
    assert store(broker).position(D0) == 0
