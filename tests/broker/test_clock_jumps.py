"""Wall-clock steps (kshim/broker/clock.py): a step back of an hour, a step forward of a
day, and a step back across a restart, with a fake wall clock and a fake monotonic clock
moved by the test. Delayed records arrive each exactly once and never before their due
time by the broker's clock; retention deletes nothing early; transaction reviews keep to
the monotonic clock. A real Broker over the in-memory log store, or the disk one where a
restart must keep the logs; the background steps are driven one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.clock import as_broker_clock
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.delay.dispatcher import deliver_due, settle_deliveries
from kshim.broker.delay.ingest import ingest_partition
from kshim.broker.delay.naming import DELIVER_AT_HEADER
from kshim.broker.retention import enforce_retention_once
from kshim.broker.transactions.transaction_states import TransactionState as State
from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import validate_produced
from kshim.protocol.records import Record, build_batch, iter_records
from kshim.storage.interface import PartitionLog, TopicPartition
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.storage.meta.transaction_store import TransactionRecord
from kshim.testing import FakeClock
from tests.broker.stepped_clocks import DAY, HOUR, MINUTE, NOW, SECOND, SteppedClocks
from tests.storage.support import read_everything

TOPIC, DELAY = "orders", "orders.delay"
T0, D0 = TopicPartition(TOPIC, 0), TopicPartition(DELAY, 0)
TIMEOUT_MS = 60_000  # the transactions' transaction.timeout.ms
CLOCK_LOG = "kshim.broker.clock"


@pytest.fixture
def clocks() -> SteppedClocks:
    return SteppedClocks()


async def open_broker(data_dir: Path, clocks: SteppedClocks, on_disk: bool) -> Broker:
    clock = clocks.broker_clock()
    values = {"log.dirs": str(data_dir), "kshim.full.view.process": "false"}
    logs = None if on_disk else MemoryLogStore(clock)
    broker = Broker(BrokerConfig.load([values]), clock=clock, logs=logs)
    await broker.start()
    return broker


@pytest.fixture
async def broker(tmp_path: Path, clocks: SteppedClocks) -> AsyncIterator[Broker]:
    """A broker over the in-memory log store with ``orders`` and its delay companion."""
    opened = await open_broker(tmp_path, clocks, on_disk=False)
    await opened.topics.create(TOPIC, 1, {})
    assert await opened.resolver.create_companion(DELAY) is not None
    yield opened
    await opened.close()


def log_of(broker: Broker, topic_partition: TopicPartition) -> PartitionLog:
    partition_log = broker.topics.log(topic_partition)
    assert partition_log is not None
    return partition_log


# -- the clock alone ------------------------------------------------------------------------


def test_a_step_back_is_read_as_it_is_and_logged_once(
    clocks: SteppedClocks, caplog: pytest.LogCaptureFixture
) -> None:
    clock = clocks.broker_clock()
    clocks.advance(MINUTE)
    assert clock() == NOW + MINUTE
    clocks.step(-HOUR)
    with caplog.at_level(logging.WARNING, CLOCK_LOG):
        assert clock() == NOW + MINUTE - HOUR
        clocks.advance(SECOND)
        assert clock() == NOW + MINUTE - HOUR + SECOND
        assert clock.expiry_now() == clock()  # retention follows it back: deletes less
    assert clock.steps_ms == [-HOUR]
    assert [record.getMessage() for record in caplog.records] == [
        "wall clock stepped back by 3600000 ms (1:00:00) to 2023-11-14T21:15:00.000Z; "
        "delayed records already delivered stay delivered and the others fall due by the "
        "wall clock as it now reads; transaction and group session timeouts run on the "
        "monotonic clock; retention deletes nothing it would not have deleted before the step"
    ]


def test_a_step_forward_is_believed_but_not_by_expiry(
    clocks: SteppedClocks, caplog: pytest.LogCaptureFixture
) -> None:
    clock = clocks.broker_clock()
    clocks.step(DAY)
    with caplog.at_level(logging.WARNING, CLOCK_LOG):
        assert clock() == NOW + DAY
        assert clock.expiry_now() == NOW  # the start plus no time elapsed
        clocks.advance(HOUR)
        assert (clock(), clock.expiry_now()) == (NOW + DAY + HOUR, NOW + HOUR)
    assert clock.steps_ms == [DAY]
    [warning] = [record.getMessage() for record in caplog.records]
    assert warning.startswith(
        "wall clock stepped forward by 86400000 ms (1 day, 0:00:00) to 2023-11-15T22:14:00.000Z;"
        " delayed records due in between are delivered now;"
    )


def test_moves_below_the_threshold_are_no_step(
    clocks: SteppedClocks, caplog: pytest.LogCaptureFixture
) -> None:
    clock = clocks.broker_clock()
    with caplog.at_level(logging.WARNING, CLOCK_LOG):
        clocks.step(SECOND)  # at the threshold: NTP's own small steps
        assert clock() == NOW + SECOND
        clocks.step(-SECOND)
        assert clock() == NOW
    assert (clock.steps_ms, caplog.records) == ([], [])


def test_a_fake_wall_clock_alone_moves_durations_too() -> None:
    fake = FakeClock(NOW)
    clock = as_broker_clock(fake)
    fake.advance(DAY)
    assert (clock(), clock.monotonic(), clock.expiry_now()) == (NOW + DAY, NOW + DAY, NOW + DAY)
    assert as_broker_clock(clock) is clock


# -- delayed delivery --------------------------------------------------------------------------


async def schedule(broker: Broker, *due_and_values: tuple[int, bytes]) -> None:
    """Produces records due at the given times to ``orders.delay`` and reads them into the
    schedule."""
    records = [
        Record(index, NOW, b"k", value, ((DELIVER_AT_HEADER, str(due).encode()),))
        for index, (due, value) in enumerate(due_and_values)
    ]
    batch = bytearray(build_batch(records))
    partition_log = log_of(broker, D0)
    offset = partition_log.append(batch, validate_produced(batch))
    await partition_log.wait_durable(offset + len(records) - 1)
    while await ingest_partition(broker, D0):
        pass


async def arrived(broker: Broker) -> list[tuple[bytes | None, int]]:
    """(value, due time) of every record in ``orders``, in offset order."""
    data = await read_everything(log_of(broker, T0))
    return [(record.value, _due(record)) for record in iter_records(data)]


def _due(record: Record) -> int:
    [due] = [value for name, value in record.headers if name == DELIVER_AT_HEADER]
    assert due is not None
    return int(due)


async def deliver(broker: Broker) -> list[bytes | None]:
    """What the background job would do now (kshim/broker/delay/runner.py): split and load
    what has come near, deliver everything due; returns the values delivered, having
    checked that none was due after the broker's clock."""
    before = len(await arrived(broker))
    store = broker.delays.store
    async with broker.delays.lock:
        while await asyncio.to_thread(store.maintain, broker.clock()):
            pass
    while await deliver_due(broker):
        pass
    now = broker.clock()
    delivered = (await arrived(broker))[before:]
    assert all(due <= now for _, due in delivered), (now, delivered)
    return [value for value, _ in delivered]


async def delivered_at(broker: Broker, clocks: SteppedClocks, wall_ms: int) -> list[bytes | None]:
    """Moves time on to just before ``wall_ms`` on the wall clock, where nothing is due,
    then to it; returns what is delivered there."""
    clocks.advance(wall_ms - 1 - clocks.wall_ms)
    assert await deliver(broker) == []
    clocks.advance(1)
    return await deliver(broker)


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
async def test_a_step_back_an_hour_delivers_nothing_twice_or_early(
    tmp_path: Path, clocks: SteppedClocks, on_disk: bool
) -> None:
    broker = await open_broker(tmp_path, clocks, on_disk)
    try:
        await broker.topics.create(TOPIC, 1, {})
        assert await broker.resolver.create_companion(DELAY) is not None
        b_due = NOW + 30 * MINUTE + 20 * SECOND
        await schedule(broker, (NOW + MINUTE, b"a"), (b_due, b"b"), (NOW + 90 * MINUTE, b"c"))
        assert await delivered_at(broker, clocks, NOW + MINUTE) == [b"a"]
        assert await delivered_at(broker, clocks, b_due) == [b"b"]
        clocks.step(-HOUR)
        assert await deliver(broker) == []
        # Produced after the step: d for five minutes ahead by the wall clock as it now
        # reads, e for a time behind what was delivered from its minute (b): e may not
        # go before b's place in the schedule, so it waits for it (late, never early).
        d_due = clocks.wall_ms + 5 * MINUTE
        await schedule(broker, (d_due, b"d"), (NOW + 30 * MINUTE + 10 * SECOND, b"e"))
        assert await delivered_at(broker, clocks, d_due) == [b"d"]
        assert await delivered_at(broker, clocks, b_due + 1) == [b"e"]
        assert await delivered_at(broker, clocks, NOW + 90 * MINUTE) == [b"c"]
        assert [value for value, _ in await arrived(broker)] == [b"a", b"b", b"d", b"e", b"c"]
    finally:
        await broker.close()


async def test_a_step_forward_a_day_delivers_what_fell_due_once(
    broker: Broker, clocks: SteppedClocks
) -> None:
    await schedule(broker, (NOW + HOUR, b"a"), (NOW + 12 * HOUR, b"b"), (NOW + 2 * DAY, b"c"))
    assert await deliver(broker) == []
    clocks.step(DAY)
    assert await deliver(broker) == [b"a", b"b"]  # their producers asked for no later
    clocks.step(-DAY)  # the step corrected
    clocks.advance(2 * DAY - 1)
    assert await deliver(broker) == []
    clocks.advance(1)
    assert await deliver(broker) == [b"c"]
    assert [value for value, _ in await arrived(broker)] == [b"a", b"b", b"c"]


async def test_a_record_read_in_while_the_clock_was_a_day_ahead_is_due_on_time(
    broker: Broker, clocks: SteppedClocks
) -> None:
    clocks.step(DAY)
    # Due before the broker's clock: filed into the minute the clock reads, a day ahead...
    await schedule(broker, (NOW + 5 * MINUTE, b"a"))
    clocks.step(-DAY)  # ...which the step back corrects before it was looked at
    assert await delivered_at(broker, clocks, NOW + 5 * MINUTE) == [b"a"]


async def test_a_step_back_across_a_restart_delivers_nothing_twice(
    tmp_path: Path, clocks: SteppedClocks
) -> None:
    broker = await open_broker(tmp_path, clocks, on_disk=True)
    try:
        await broker.topics.create(TOPIC, 1, {})
        assert await broker.resolver.create_companion(DELAY) is not None
        await schedule(broker, (NOW + MINUTE, b"a"), (NOW + 30 * MINUTE, b"b"),
                       (NOW + 30 * MINUTE + SECOND, b"c"), (NOW + 90 * MINUTE, b"d"))  # fmt: skip
        clocks.advance(30 * MINUTE)
        assert await deliver(broker) == [b"a", b"b"]
    finally:
        await broker.close()
    clocks.step(-HOUR)  # while stopped: the new process cannot tell
    broker = await open_broker(tmp_path, clocks, on_disk=True)
    try:
        await settle_deliveries(broker)  # what the background job does first
        assert await deliver(broker) == []
        assert await delivered_at(broker, clocks, NOW + 30 * MINUTE + SECOND) == [b"c"]
        assert await delivered_at(broker, clocks, NOW + 90 * MINUTE) == [b"d"]
        assert [value for value, _ in await arrived(broker)] == [b"a", b"b", b"c", b"d"]
    finally:
        await broker.close()


# -- retention ------------------------------------------------------------------------------


async def stamped_segments(broker: Broker, count: int) -> PartitionLog:
    """``orders`` with ``count`` segments, one batch each, stamped NOW, NOW + 1 s, ...;
    retention.ms one hour."""
    configs = {"kshim.full.view": "false", "segment.bytes": "200", "retention.ms": str(HOUR)}
    await broker.topics.create(TOPIC, 1, configs)
    partition_log = log_of(broker, T0)
    for index in range(count):  # each ~130-byte batch fills a 200-byte segment
        batch = bytearray(build_batch([Record(0, NOW + index * SECOND, b"k", b"v" * 50)]))
        offset = partition_log.append(batch, validate_produced(batch))
        await partition_log.wait_durable(offset)
    return partition_log


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
async def test_a_step_forward_a_day_deletes_nothing_early(
    tmp_path: Path, clocks: SteppedClocks, on_disk: bool
) -> None:
    broker = await open_broker(tmp_path, clocks, on_disk)
    try:
        partition_log = await stamped_segments(broker, 6)
        clocks.step(DAY)
        assert await enforce_retention_once(broker) == 0
        assert partition_log.log_start_offset == 0
        clocks.advance(HOUR + 2 * SECOND + 1)  # an hour since, as time passes: two expire
        assert await enforce_retention_once(broker) == 3
        assert partition_log.log_start_offset == 3
    finally:
        await broker.close()


async def test_a_step_back_an_hour_deletes_nothing_stamped_before_it(
    tmp_path: Path, clocks: SteppedClocks
) -> None:
    broker = await open_broker(tmp_path, clocks, on_disk=False)
    try:
        partition_log = await stamped_segments(broker, 4)
        clocks.step(-HOUR)
        # An hour and a half passes: by the wall clock, the records are half an hour old.
        clocks.advance(90 * MINUTE)
        assert await enforce_retention_once(broker) == 0
        clocks.advance(30 * MINUTE + SECOND + 1)
        assert await enforce_retention_once(broker) == 2
        assert partition_log.log_start_offset == 2
    finally:
        await broker.close()


# -- transaction timeouts ------------------------------------------------------------------


async def begin_transaction(broker: Broker, transactional_id: str) -> TransactionRecord:
    """A transaction Ongoing on ``orders``-0 with a timeout of TIMEOUT_MS."""
    coordinator = broker.transactions
    await broker.topics.create(TOPIC, 1, {})
    producer = await coordinator.init_producer(
        transactional_id, TIMEOUT_MS, -1, -1, broker.reviewer.resolve, fenced_code=True
    )
    assert producer.error == ErrorCode.none
    added = await coordinator.add_partitions(
        transactional_id, producer.producer_id, producer.producer_epoch, [T0],
        lambda _: True, fenced_code=True,
    )  # fmt: skip
    assert added == {T0: ErrorCode.none}
    return coordinator.records[transactional_id]


async def test_a_step_forward_a_day_times_no_transaction_out(
    tmp_path: Path, clocks: SteppedClocks
) -> None:
    broker = await open_broker(tmp_path, clocks, on_disk=False)
    try:
        record = await begin_transaction(broker, "tx")
        clocks.step(DAY)
        clocks.advance(TIMEOUT_MS - 1)
        assert await broker.reviewer.review_due() == 0
        assert record.state == State.ONGOING
        clocks.advance(1)
        assert await broker.reviewer.review_due() == 1  # no hook: aborted, as Kafka does
        assert record.state == State.COMPLETE_ABORT
    finally:
        await broker.close()


async def test_a_step_back_an_hour_puts_no_transaction_off(
    tmp_path: Path, clocks: SteppedClocks
) -> None:
    broker = await open_broker(tmp_path, clocks, on_disk=False)
    try:
        record = await begin_transaction(broker, "tx")
        clocks.step(-HOUR)
        clocks.advance(TIMEOUT_MS - 1)
        assert await broker.reviewer.review_due() == 0
        clocks.advance(1)
        assert await broker.reviewer.review_due() == 1
        assert record.state == State.COMPLETE_ABORT
    finally:
        await broker.close()


async def test_a_step_back_across_a_restart_puts_no_transaction_off_past_its_timeout(
    tmp_path: Path, clocks: SteppedClocks
) -> None:
    broker = await open_broker(tmp_path, clocks, on_disk=False)
    try:
        record = await begin_transaction(broker, "tx")
        assert record.next_review_ms == NOW + TIMEOUT_MS  # what is stored: wall time
        clocks.advance(TIMEOUT_MS // 2)
    finally:
        await broker.close()
    clocks.step(-HOUR)
    broker = await open_broker(tmp_path, clocks, on_disk=False)
    try:
        # The wall clock says an hour and a half minute to go; the wait is bounded by
        # the timeout the transaction had when it was stored.
        clocks.advance(TIMEOUT_MS - 1)
        assert await broker.reviewer.review_due() == 0
        clocks.advance(1)
        assert await broker.reviewer.review_due() == 1
        assert broker.transactions.records["tx"].state == State.COMPLETE_ABORT
    finally:
        await broker.close()
