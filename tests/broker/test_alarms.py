"""Alarms (kshim/broker/alarms/): each said once until cleared, as a log line and to the
webhook; the checks of group lag (sustained), disk free and slow group-commit rounds
against a real Broker over the in-memory log store with a fake clock; the webhook
against a local HTTP server, with retries and a receiver that is down."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kshim.broker.alarms.checks import (
    DISK_FREE,
    FSYNC_P99,
    GROUP_LAG,
    MIN_ROUNDS,
    AlarmSettings,
    CheckState,
    check_once,
)
from kshim.broker.alarms.registry import CLEARED, HAPPENED, RAISED, Alarm, Alarms
from kshim.broker.alarms.webhook import Webhook, WebhookSettings
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.jobs.broker_jobs import watched
from kshim.protocol.record_batch import read_header
from kshim.protocol.records import Record, build_batch
from kshim.storage.interface import TopicPartition
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.storage.meta.committed_offsets import CommittedOffset
from kshim.testing import FakeClock, failure_lines, free_port

NOW = 1_700_000_000_000
ORDERS = TopicPartition("orders", 0)
WAIT_S = 10.0
OFF = AlarmSettings(
    interval_s=1, group_lag_records=0, group_lag_s=0, view_lag_records=0, view_lag_s=0,
    disk_free_bytes=0, fsync_p99_s=0,
)  # fmt: skip


# -- the registry ---------------------------------------------------------------------------


def test_a_condition_is_said_once_until_cleared(caplog: pytest.LogCaptureFixture) -> None:
    told: list[Alarm] = []
    alarms = Alarms(told.append)
    with caplog.at_level(logging.WARNING, "kshim.broker.alarms.registry"):
        for value in (7, 8, 9):
            alarms.hold(GROUP_LAG, "g orders-0", value, 5, "behind")
        alarms.release(GROUP_LAG, "g orders-0", 2)
        alarms.release(GROUP_LAG, "g orders-0", 1)  # nothing raised: nothing to clear
    assert [(alarm.state, alarm.value) for alarm in told] == [(RAISED, 7), (CLEARED, 2)]
    assert [record.getMessage() for record in caplog.records] == [
        "ALARM: behind (kind=group_lag subject=g orders-0 value=7 threshold=5 state=raised)",
        "ALARM: cleared: behind (kind=group_lag subject=g orders-0 value=2 threshold=5 "
        "state=cleared)",
    ]
    assert alarms.raised == {GROUP_LAG: 1} and not alarms.active


def test_an_event_is_said_every_time_and_never_active() -> None:
    told: list[Alarm] = []
    alarms = Alarms(told.append)
    alarms.happened("transaction_undecided", "tx", 3, 3, "undecided")
    alarms.happened("transaction_undecided", "tx", 3, 3, "undecided")
    assert [alarm.state for alarm in told] == [HAPPENED, HAPPENED]
    assert alarms.raised["transaction_undecided"] == 2 and not alarms.active


def test_alarms_of_subjects_gone_are_cleared() -> None:
    alarms = Alarms()
    alarms.hold(GROUP_LAG, "a orders-0", 9, 5, "behind")
    alarms.hold(GROUP_LAG, "b orders-0", 9, 5, "behind")
    alarms.hold(DISK_FREE, "/data", 1, 5, "full")
    alarms.forget(GROUP_LAG, {"b orders-0"}.__contains__)
    assert set(alarms.active) == {(GROUP_LAG, "b orders-0"), (DISK_FREE, "/data")}


# -- the checks, on a broker ----------------------------------------------------------------


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    clock = FakeClock(NOW)
    config = BrokerConfig.load([{"log.dirs": str(tmp_path), "kshim.full.view.process": "false"}])
    opened = Broker(config, clock=clock, logs=MemoryLogStore(clock))
    await opened.start()
    await opened.topics.create(ORDERS.topic, 1, {})
    yield opened
    await opened.close()


async def produce(broker: Broker, count: int) -> None:
    log = broker.topics.log(ORDERS)
    assert log is not None
    batch = build_batch([Record(index, NOW, None, b"v", ()) for index in range(count)])
    offset = log.append(batch, read_header(batch))
    await log.wait_durable(offset + count - 1)


async def commit(broker: Broker, group: str, offset: int) -> None:
    await broker.groups.offsets.commit(group, {ORDERS: CommittedOffset(offset, -1, "", NOW)})


def advance(broker: Broker, ms: int) -> None:
    clock = broker.clock.wall_clock
    assert isinstance(clock, FakeClock)
    clock.advance(ms)


async def test_group_lag_raises_only_once_sustained_and_clears(broker: Broker) -> None:
    settings = AlarmSettings(1, 5, 2.0, 0, 0, 0, 0)  # 5 records behind for 2 s
    state = CheckState()
    await produce(broker, 10)
    await commit(broker, "billing", 3)  # 7 behind, over 5
    await check_once(watched(broker), settings, state)
    assert not broker.alarms.active  # over, but not for 2 s yet
    advance(broker, 1999)
    await check_once(watched(broker), settings, state)
    assert not broker.alarms.active
    advance(broker, 1)
    await check_once(watched(broker), settings, state)
    [alarm] = broker.alarms.active.values()
    assert (alarm.kind, alarm.subject, alarm.value, alarm.threshold) == (
        GROUP_LAG, "billing orders-0", 7, 5,
    )  # fmt: skip
    await commit(broker, "billing", 6)  # 4 behind: cleared at the next check
    await check_once(watched(broker), settings, state)
    assert not broker.alarms.active
    assert broker.alarms.raised[GROUP_LAG] == 1


async def test_disk_free_below_the_threshold_raises(broker: Broker) -> None:
    settings = AlarmSettings(1, 0, 0, 0, 0, 1 << 62, 0)  # more than any disk has
    await check_once(watched(broker), settings, CheckState())
    assert list(broker.alarms.active) == [(DISK_FREE, broker.config.data_dir)]
    await check_once(watched(broker), OFF, CheckState())  # a check turned off leaves it as it is
    await check_once(watched(broker), AlarmSettings(1, 0, 0, 0, 0, 1, 0), CheckState())
    assert not broker.alarms.active


async def test_slow_group_commit_rounds_raise_at_the_99th_percentile(broker: Broker) -> None:
    settings = AlarmSettings(1, 0, 0, 0, 0, 0, 0.5)
    for _ in range(MIN_ROUNDS - 1):
        broker.flush_rounds.add(2.0, 1)
    await check_once(watched(broker), settings, CheckState())
    assert not broker.alarms.active  # too few rounds to judge
    for _ in range(98):
        broker.flush_rounds.add(0.001, 1)
    for _ in range(2):
        broker.flush_rounds.add(2.0, 1)
    await check_once(watched(broker), settings, CheckState())
    [alarm] = broker.alarms.active.values()
    assert (alarm.kind, alarm.value) == (FSYNC_P99, 2.0)
    for _ in range(100):
        broker.flush_rounds.add(0.001, 1)
    await check_once(watched(broker), settings, CheckState())
    assert not broker.alarms.active


# -- the webhook ------------------------------------------------------------------------------


class Receiver(ThreadingHTTPServer):
    def __init__(self, statuses: list[int]) -> None:
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.statuses = statuses  # answered in turn; the last repeats
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/alarms"


class ReceiverHandler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.received.append(body)
            status = self.server.statuses[
                min(len(self.server.received), len(self.server.statuses)) - 1
            ]
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def receiving(statuses: list[int]) -> Iterator[Receiver]:
    server = Receiver(statuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT_S)


@contextlib.asynccontextmanager
async def running(webhook: Webhook) -> AsyncIterator[None]:
    task = asyncio.create_task(webhook.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(condition: Any) -> None:
    """Polls: the webhook's counters change in its own task, with no event to wait on."""
    async with asyncio.timeout(WAIT_S):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


ALARM = Alarm(GROUP_LAG, "billing orders-0", 7, 5, "behind", RAISED, NOW)


async def test_the_webhook_receives_each_alarm_as_json_after_retries() -> None:
    with receiving([500, 503, 200]) as receiver:
        webhook = Webhook(WebhookSettings(receiver.url, timeout_s=5, retries=3, first_pause_s=0.01))
        async with running(webhook):
            webhook.notify(ALARM)
            await until(lambda: webhook.delivered == 1)
    assert receiver.received == [ALARM.as_json()] * 3
    assert webhook.failed == 0


async def test_a_receiver_that_is_down_costs_retries_then_the_alarm() -> None:
    webhook = Webhook(WebhookSettings(f"http://127.0.0.1:{free_port()}/", 1, 2, 0.01))
    async with running(webhook):
        webhook.notify(ALARM)
        webhook.notify(ALARM)
        await until(lambda: webhook.failed == 2)
    assert webhook.delivered == 0


def test_notify_never_blocks_and_keeps_the_newest() -> None:
    webhook = Webhook(WebhookSettings("http://127.0.0.1:1/"))
    for index in range(1100):
        webhook.notify(Alarm(GROUP_LAG, str(index), 1, 0, "x"))
    assert webhook._queue.qsize() == 1000
    assert webhook._queue.get_nowait().subject == "100"


def test_an_alarm_line_is_no_failure_of_the_broker_unless_asked_for() -> None:
    log = "\n".join([
        "2026-11-27 10:00:00,000 ERROR kshim.broker.alarms.registry: ALARM: slow (kind=fsync_p99)",
        "2026-11-27 10:00:01,000 ERROR kshim.server.connection: closing connection: failed",
    ])  # fmt: skip
    assert failure_lines(log) == [log.splitlines()[1]]
    assert failure_lines(log, also=["kind=fsync_p99"]) == log.splitlines()
