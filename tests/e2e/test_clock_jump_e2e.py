"""Wall-clock steps under a real ``kshim serve``: the broker runs under libfaketime (the
Debian package ``faketime``), whose offset file the test rewrites to step the broker's
wall clock back an hour and then forward a day, its monotonic clock left alone.

- a delayed record delivered before the step back is not delivered again; one produced
  after it for two seconds ahead, by the broker's clock as it now reads, arrives then;
  one due two seconds ahead by the real clock waits for the broker's clock to reach it,
  which the step forward does, and it arrives once;
- a record due two days ahead stays pending after the step forward;
- a transaction opened before the steps is still open after them (its timeout runs on
  the monotonic clock) and commits;
- retention (an hour, checked twice a second) deletes nothing after the step forward;
- the broker logs each step once, as a WARNING, and nothing worse.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.testing import BrokerProcess, failure_lines
from tests.e2e.client_helpers import Deadline

pytestmark = pytest.mark.timeout(120)

LIBFAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))), None)
DELIVER_AT = "kshim-deliver-at"
HOUR_S, DAY_S = 3600, 86_400
HOUR_MS = HOUR_S * 1000
WAIT_S = 15.0  # for anything the broker is expected to do within a second or two
CLOCK_SLACK_MS = 50  # the test's and the broker's readings of one clock, moments apart


class FakeTimeBroker(BrokerProcess):
    """``kshim serve`` under libfaketime: its wall clock is the real one plus the offset in
    seconds written to ``offset_file``, read again on every call (FAKETIME_NO_CACHE); its
    monotonic clock is the real one (FAKETIME_DONT_FAKE_MONOTONIC)."""

    def __init__(self, data_dir: Path, offset_file: Path, settings: list[str]) -> None:
        super().__init__(data_dir, settings)
        self.offset_file = offset_file
        self.step_to(0)

    def command(self) -> list[str]:
        assert LIBFAKETIME is not None
        return ["env", f"LD_PRELOAD={LIBFAKETIME}", f"FAKETIME_TIMESTAMP_FILE={self.offset_file}",
                "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1",
                *super().command()]  # fmt: skip

    def step_to(self, offset_s: int) -> None:
        """Sets the broker's wall clock to the real one plus ``offset_s`` (atomically: the
        broker never reads half a file)."""
        written = self.offset_file.with_suffix(".new")
        written.write_text(f"{offset_s:+d}\n")
        os.replace(written, self.offset_file)

    def wait_for_log(self, text: str) -> None:
        deadline = Deadline(WAIT_S)
        while text not in self.log_text():
            assert not deadline.expired(), f"no {text!r} in the log:\n{self.log_tail()}"
            time.sleep(0.05)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[FakeTimeBroker]:
    if LIBFAKETIME is None:
        pytest.skip("libfaketime is not installed (Debian package faketime)")
    settings = ["log.retention.check.interval.ms=500", "kshim.metrics.listen="]
    started = FakeTimeBroker(tmp_path / "data", tmp_path / "faketime", settings)
    started.start()
    try:
        yield started
    finally:
        started.stop()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def produce_due(producer: Producer, topic: str, value: bytes, due_ms: int) -> None:
    producer.produce(topic, value=value, key=value, headers=[(DELIVER_AT, str(due_ms).encode())])
    assert producer.flush(20) == 0


@contextlib.contextmanager
def reader(bootstrap: str, topic: str) -> Iterator[Consumer]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 20,
                         "isolation.level": "read_uncommitted"})  # fmt: skip
    consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        yield consumer
    finally:
        consumer.close()


def arrivals_for(consumer: Consumer, seconds: float) -> list[tuple[bytes, int]]:
    """(value, when it arrived, real ms) of each record that arrives within ``seconds``."""
    arrived: list[tuple[bytes, int]] = []
    deadline = Deadline(seconds)
    while not deadline.expired():
        for message in consumer.consume(100, deadline.poll_timeout_s(0.1)):
            assert message.error() is None, message.error()
            value = message.value()
            assert isinstance(value, bytes)
            arrived.append((value, now_ms()))
    return arrived


def open_transaction(bootstrap: str, topic: str) -> Producer:
    """A transactional producer with one record written and its transaction left open
    (timeout 60 s: far past the test, far short of the steps)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "clock-jump",
                         "transaction.timeout.ms": 60_000})  # fmt: skip
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, value=b"in a transaction")
    assert producer.flush(20) == 0
    return producer


def test_steps_back_and_forward_deliver_once_keep_data_and_transactions(
    broker: FakeTimeBroker,
) -> None:
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    kept = {"segment.bytes": "200", "retention.ms": str(HOUR_MS), "kshim.full.view": "false"}
    futures = admin.create_topics([NewTopic("orders", 1, 1), NewTopic("kept", 1, 1, config=kept),
                                   NewTopic("txn", 1, 1)])  # fmt: skip
    for future in futures.values():
        future.result(timeout=20)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for index in range(4):  # a batch each, stamped now: a segment each
        producer.produce("kept", value=b"%d" % index + b"." * 100)
        assert producer.flush(20) == 0
    transaction = open_transaction(bootstrap, "txn")
    with reader(bootstrap, "orders") as consumer:
        produce_due(producer, "orders.delay", b"a", now_ms() + 500)
        produce_due(producer, "orders.delay", b"later", now_ms() + 2 * DAY_S * 1000)
        assert [value for value, _ in arrivals_for(consumer, 2.0)] == [b"a"]

        broker.step_to(-HOUR_S)
        broker.wait_for_log("wall clock stepped back by")
        b_due = now_ms() - HOUR_MS + 2000  # two seconds ahead by the broker's clock
        c_due = now_ms() + 2000  # by the real clock: an hour and two seconds by the broker's
        produce_due(producer, "orders.delay", b"b", b_due)
        produce_due(producer, "orders.delay", b"c", c_due)
        arrived = arrivals_for(consumer, 4.0)
        assert [value for value, _ in arrived] == [b"b"]
        assert arrived[0][1] - HOUR_MS >= b_due - CLOCK_SLACK_MS

        broker.step_to(DAY_S)
        broker.wait_for_log("wall clock stepped forward by")
        assert [value for value, _ in arrivals_for(consumer, 2.0)] == [b"c"]
    transaction.commit_transaction(20)  # still open: not timed out by the step
    low, high = consumer_watermarks(bootstrap, "kept")
    assert (low, high) == (0, 4)  # two retention checks since the step deleted nothing
    log = broker.log_text()
    steps = [int(size) for size in re.findall(r"wall clock stepped \w+ by (\d+) ms", log)]
    assert len(steps) == 2, log
    assert abs(steps[0] - HOUR_MS) < 100 and abs(steps[1] - HOUR_MS - DAY_S * 1000) < 100
    assert re.findall(r"wall clock stepped (\w+)", log) == ["back", "forward"]
    assert failure_lines(log) == []


def consumer_watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        low, high = consumer.get_watermark_offsets(
            ConfluentTopicPartition(topic, 0), timeout=10, cached=False
        )
        return int(low), int(high)
    finally:
        consumer.close()
