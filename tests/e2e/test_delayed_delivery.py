"""Delayed delivery through ``T.delay`` with real clients against a real ``kshim serve``.

- confluent-kafka (idempotent): records due at ``kshim-deliver-at``, ``kshim-delay-ms``
  after their timestamp, or in the past arrive in ``T`` in due order, never before their
  due time, at new offsets, with key, value, headers and timestamp kept and
  ``kshim-delayed-from`` = ``partition:offset`` in ``T.delay``; a LogAppendTime topic
  stamps the delivery instead;
- kafka-python (gzip) and aiokafka producers deliver through ``T.delay`` too, partition p
  of ``T.delay`` to partition p of ``T``; ``kshim-delay-ms`` on a record without a
  timestamp is refused;
- ``kshim-delay-cancel`` removes every pending record with its key (from any partition,
  not those after it), ``kshim-delay-replace`` replaces them: the replaced value arrives
  once, the cancelled key never;
- each invalid record (no due time, a malformed one, both headers, cancel or replace
  without a key, due beyond ``kshim.delay.max.ms``) has its whole batch refused with
  INVALID_RECORD, nothing of it stored, and the broker goes on; a broker with
  ``kshim.delay.max.ms=60000`` refuses +120 s and accepts +30 s;
- a transactional producer's delayed records are scheduled when it commits, an aborted
  transaction's never;
- ``T.delay`` is write-only (Fetch and ListOffsets: INVALID_TOPIC_EXCEPTION), left out
  of the listing of all topics, read-only in its configs, not deletable, grows with ``T``,
  and no topic can be created under a ``.delay`` name;
- ``T.full`` shows a delivered record at its delivered offset;
- kill -9 before or while 20,000 records are delivered, then a restart: each arrives
  exactly once, in due order;
- a record due in a day is still pending after a clean restart and a kill -9, while one
  due now is delivered;
- deleting ``T`` deletes its pending records: a recreated ``T`` never gets them.

A record that must never arrive is looked for in ``T`` until well past its due time;
``kshim delays --json`` (the schedule, read from the data directory) shows that a record
is pending where absence alone could not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

from kshim.testing import BrokerProcess, failure_lines
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.partition_reading import consume_until_end

pytestmark = pytest.mark.timeout(120)

DELIVER_AT = "kshim-deliver-at"
DELAY_MS = "kshim-delay-ms"
CANCEL = "kshim-delay-cancel"
REPLACE = "kshim-delay-replace"
DELAYED_FROM = "kshim-delayed-from"
DELAY_SUFFIX = ".delay"

# The consumer's and the broker's clocks are the same clock, read at different moments.
CLOCK_SLACK_MS = 50
# How late a delivery may be on a busy machine (the broker looks at least every second).
LATE_MS = 3000
# How long past a due time a record that must never arrive is waited for.
NEVER_WAIT_S = 1.5
MAX_DELAY_MS = 60_000
THREE_YEARS_MS = 3 * 365 * 24 * 3600 * 1000
ONE_DAY_MS = 24 * 3600 * 1000
KILL_RECORDS = 20_000
# Far enough ahead that the 20,000 records are produced and scheduled before they are due.
KILL_DUE_AHEAD_MS = 2500

Header = tuple[str, bytes | None]
Headers = tuple[Header, ...]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A record as produced; ``timestamp_ms`` 0 lets the producer stamp it."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class Arrival:
    """A record as a consumer of ``T`` returned it, and when (wall-clock ms)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    received_ms: int


Report = tuple[int | None, int | None]  # a delivery report: (error code, None) or (None, offset)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def deliver_at(epoch_ms: int) -> Header:
    return (DELIVER_AT, str(epoch_ms).encode())


def delay_ms(milliseconds: int) -> Header:
    return (DELAY_MS, str(milliseconds).encode())


def delayed_from(partition: int, offset: int) -> Header:
    return (DELAYED_FROM, f"{partition}:{offset}".encode())


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=20)


def confluent_producer(bootstrap: str, **settings: str | int | bool) -> Producer:
    config: dict[str, str | int | bool] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    return Producer({**config, **settings})


def produce(
    producer: Producer, topic: str, records: Sequence[Outgoing], partition: int = 0
) -> list[Report]:
    """Produces ``records`` to one partition, flushes, and returns their delivery reports in
    produce order."""
    reports: list[Report | None] = [None] * len(records)

    def reporter(index: int) -> Callable[[KafkaError | None, Message], None]:
        def report(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                reports[index] = (error.code(), None)  # librdkafka's offset means nothing
            else:
                reports[index] = (None, message.offset())

        return report

    for index, record in enumerate(records):
        producer.produce(
            topic, value=record.value, key=record.key, partition=partition,
            headers=list(record.headers), timestamp=record.timestamp_ms,
            on_delivery=reporter(index),
        )  # fmt: skip
    assert producer.flush(20) == 0
    assert all(report is not None for report in reports)
    return [report for report in reports if report is not None]


def offsets(count: int, first: int = 0) -> list[Report]:
    """The reports of ``count`` records stored at consecutive offsets from ``first``."""
    return [(None, first + index) for index in range(count)]


@contextlib.contextmanager
def reader(bootstrap: str, topic: str, partitions: Sequence[int] = (0,)) -> Iterator[Consumer]:
    """A consumer of ``topic`` from the beginning, polling often so that a record is
    returned soon after it is appended."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "fetch.wait.max.ms": 20, "fetch.error.backoff.ms": 50}
    )  # fmt: skip
    consumer.assign([ConfluentTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    try:
        yield consumer
    finally:
        consumer.close()


def headers_of(message: Message) -> Headers:
    """A consumed record's headers (confluent returns a list of pairs, or None for none)."""
    headers = message.headers() or []
    assert isinstance(headers, list)
    return tuple(
        (name, value.encode() if isinstance(value, str) else value) for name, value in headers
    )


def arrival(message: Message) -> Arrival:
    received_ms = now_ms()
    error = message.error()
    assert error is None, error
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None
    return Arrival(partition, offset, message.key(), message.value(), headers_of(message),
                   message.timestamp()[1], received_ms)  # fmt: skip


def collect(consumer: Consumer, count: int, deadline: Deadline) -> list[Arrival]:
    """The next ``count`` records, waiting until the deadline for them."""
    arrivals: list[Arrival] = []
    while len(arrivals) < count:
        assert not deadline.expired(), f"{len(arrivals)} of {count} records arrived"
        for message in consumer.consume(count - len(arrivals), deadline.poll_timeout_s()):
            arrivals.append(arrival(message))
    return arrivals


def collect_until(consumer: Consumer, until_ms: int) -> list[Arrival]:
    """Every record that arrives until the wall clock reaches ``until_ms``."""
    arrivals: list[Arrival] = []
    deadline = Deadline(max(0.0, (until_ms - now_ms()) / 1000))
    while not deadline.expired():
        for message in consumer.consume(1000, deadline.poll_timeout_s(0.1)):
            arrivals.append(arrival(message))
    return arrivals


def summary(arrivals: Sequence[Arrival]) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, delayed-from) of each arrival: what a failed assertion shows."""
    return [(a.offset, a.key, dict(a.headers).get(DELAYED_FROM)) for a in arrivals]


def high_watermark(consumer: Consumer, topic: str, partition: int = 0) -> int:
    _, high = consumer.get_watermark_offsets(
        ConfluentTopicPartition(topic, partition), timeout=5, cached=False
    )
    return int(high)


def described_without_creating(bootstrap: str, name: str) -> Any:
    """The Metadata entry of ``name`` as a consumer asks for it: without auto-creation (an
    admin client is a producer to librdkafka, whose request for ``T.delay`` creates ``T``
    on a broker that auto-creates topics)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return consumer.list_topics(name, timeout=10).topics[name]
    finally:
        consumer.close()


def delay_status(broker: BrokerProcess) -> dict[str, dict[str, Any]]:
    """What ``kshim delays --json`` reads from the broker's data directory, per topic with
    records pending or delivered: ``pending``, ``next_due_ms``, ``delivered``, ..."""
    command = [sys.executable, "-m", "kshim", "delays", "--json", "--data-dir", broker.data_dir]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    return {row["topic"]: row for row in rows}


# --------------------------------------------------------------------------------------
# Due times, order and what a delivered record keeps
# --------------------------------------------------------------------------------------


def test_confluent_records_arrive_in_due_order(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-order")
    create_topic(bootstrap, topic)
    producer = confluent_producer(bootstrap, **{"enable.idempotence": True})
    with reader(bootstrap, topic) as consumer:
        start = now_ms()
        records = [
            Outgoing(b"late", b"at +1.5 s", (("trace", b"a"), deliver_at(start + 1500)),
                     start - 5000),
            Outgoing(b"soon", b"0.3 s after its timestamp", (delay_ms(300), ("trace", b"")),
                     start),
            Outgoing(None, b"past", (deliver_at(start - 60_000), ("bin", b"\x00\xff")),
                     start - 4000),
        ]  # fmt: skip
        due = [start + 1500, start + 300, start - 60_000]
        assert produce(producer, topic + DELAY_SUFFIX, records) == offsets(3)
        produced_ms = now_ms()
        arrivals = collect(consumer, 3, Deadline())
        arrivals += collect_until(consumer, now_ms() + 300)  # and nothing more
    order = [2, 1, 0]  # due order: the past one, +0.3 s, +1.5 s
    assert summary(arrivals) == [
        (position, records[index].key, f"0:{index}".encode())
        for position, index in enumerate(order)
    ]
    for got, index in zip(arrivals, order, strict=True):
        sent = records[index]
        assert (got.key, got.value, got.timestamp_ms) == (sent.key, sent.value, sent.timestamp_ms)
        assert got.headers == (*sent.headers, delayed_from(0, index))
        assert got.received_ms >= due[index] - CLOCK_SLACK_MS, f"record {index} came early"
        assert got.received_ms <= max(due[index], produced_ms) + LATE_MS, f"{index} late"


def test_kafka_python_producer_delivers_per_partition(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-kp")
    create_topic(bootstrap, topic, partitions=2)
    with reader(bootstrap, topic, partitions=(0, 1)) as consumer:
        stamp = now_ms()
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, compression_type="gzip"
        )
        try:
            sent = [
                producer.send(topic + DELAY_SUFFIX, key=b"p1", value=b"in 0.2 s", partition=1,
                              headers=[delay_ms(200)], timestamp_ms=stamp),
                producer.send(topic + DELAY_SUFFIX, key=b"p0", value=b"now", partition=0,
                              headers=[deliver_at(stamp)], timestamp_ms=stamp - 1),
            ]  # fmt: skip
            assert [(f.get(timeout=20).partition, f.get(timeout=20).offset) for f in sent] == [
                (1, 0),
                (0, 0),
            ]
        finally:
            producer.close(timeout=10)
        arrivals = collect(consumer, 2, Deadline())
    by_partition = {got.partition: got for got in arrivals}
    assert sorted(by_partition) == [0, 1]
    one, zero = by_partition[1], by_partition[0]
    assert (one.offset, one.key, one.value, one.timestamp_ms) == (0, b"p1", b"in 0.2 s", stamp)
    assert one.headers == (delay_ms(200), delayed_from(1, 0))
    assert one.received_ms >= stamp + 200 - CLOCK_SLACK_MS
    assert (zero.offset, zero.key, zero.value, zero.timestamp_ms) == (0, b"p0", b"now", stamp - 1)
    assert zero.headers == (deliver_at(stamp), delayed_from(0, 0))


def test_delay_ms_needs_a_timestamp(shared_broker: BrokerProcess) -> None:
    """kafka-python can send a record without a timestamp (-1): ``kshim-delay-ms`` has
    nothing to count from, so the batch is refused; ``kshim-deliver-at`` needs none."""
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-no-ts")
    create_topic(bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    try:
        with pytest.raises(KafkaPythonError, match="InvalidRecord"):
            producer.send(topic + DELAY_SUFFIX, key=b"k", value=b"v", partition=0,
                          headers=[delay_ms(0)], timestamp_ms=-1).get(timeout=20)  # fmt: skip
        accepted = producer.send(topic + DELAY_SUFFIX, key=b"k", value=b"at", partition=0,
                                 headers=[deliver_at(now_ms())], timestamp_ms=-1)  # fmt: skip
        assert accepted.get(timeout=20).offset == 0
    finally:
        producer.close(timeout=10)
    with reader(bootstrap, topic) as consumer:
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, now_ms() + 100)
    assert summary(arrivals) == [(0, b"k", b"0:0")]
    assert arrivals[0].timestamp_ms == -1


async def test_aiokafka_producer_delivers(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-aio")
    create_topic(bootstrap, topic, partitions=2)
    stamp = now_ms()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        first = await producer.send_and_wait(
            topic + DELAY_SUFFIX, key=b"aio", value=b"in 0.4 s", partition=1,
            headers=[deliver_at(stamp + 400)], timestamp_ms=stamp,
        )  # fmt: skip
        second = await producer.send_and_wait(
            topic + DELAY_SUFFIX, key=b"aio", value=b"at once", partition=1,
            headers=[delay_ms(0)], timestamp_ms=stamp,
        )  # fmt: skip
    finally:
        await producer.stop()
    assert (first.partition, first.offset, second.offset) == (1, 0, 1)
    with reader(bootstrap, topic, partitions=(0, 1)) as consumer:
        arrivals = await asyncio.to_thread(collect, consumer, 2, Deadline())
        arrivals += await asyncio.to_thread(collect_until, consumer, stamp + 400 + 300)
    assert summary(arrivals) == [(0, b"aio", b"1:1"), (1, b"aio", b"1:0")]
    assert [(a.partition, a.value) for a in arrivals] == [(1, b"at once"), (1, b"in 0.4 s")]
    assert arrivals[1].received_ms >= stamp + 400 - CLOCK_SLACK_MS


def test_log_append_time_topic_stamps_the_delivery(shared_broker: BrokerProcess) -> None:
    """A topic with ``message.timestamp.type=LogAppendTime`` stamps a delivered record with
    the time it was appended, as it does any other record."""
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-lat")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"message.timestamp.type": "LogAppendTime"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=20)
    with reader(bootstrap, topic) as consumer:
        start = now_ms()
        record = Outgoing(b"k", b"v", (deliver_at(start + 500),), start - 10_000)
        assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, [record]) == offsets(1)
        [got] = collect(consumer, 1, Deadline())
        assert collect_until(consumer, now_ms() + 100) == []
    assert (got.offset, got.headers) == (0, (*record.headers, delayed_from(0, 0)))
    assert start + 500 - CLOCK_SLACK_MS <= got.timestamp_ms <= got.received_ms + CLOCK_SLACK_MS


# --------------------------------------------------------------------------------------
# Cancel and replace by key
# --------------------------------------------------------------------------------------


def test_cancel_and_replace_by_key(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-cancel")
    create_topic(bootstrap, topic)
    producer = confluent_producer(bootstrap, **{"enable.idempotence": True})
    with reader(bootstrap, topic) as consumer:
        start = now_ms()
        due, later = start + 1500, start + 1700
        scheduled = [
            Outgoing(b"k1", b"first", (deliver_at(due),)),  # 0: cancelled by 4
            Outgoing(b"k1", b"second", (deliver_at(later),)),  # 1: cancelled by 4
            Outgoing(b"k2", b"old", (deliver_at(due),)),  # 2: replaced by 5
            Outgoing(b"k3", b"kept", (deliver_at(due),)),  # 3
        ]
        assert produce(producer, topic + DELAY_SUFFIX, scheduled) == offsets(4)
        time.sleep(0.3)  # read into the schedule: cancelled from there, not from one batch
        changes = [
            Outgoing(b"k1", None, ((CANCEL, b""),)),  # 4: never delivered itself
            Outgoing(b"k2", b"new", ((REPLACE, b""), deliver_at(start + 1600))),  # 5
            Outgoing(b"k4", b"replaces nothing", ((REPLACE, b"yes"), deliver_at(due))),  # 6
            Outgoing(b"k5", b"cancelled by 8", (deliver_at(due),)),  # 7
            Outgoing(b"k5", b"", ((CANCEL, b"any value"), ("trace", b"x"))),  # 8
            Outgoing(b"k1", b"after the cancel", (deliver_at(due),)),  # 9
        ]
        assert produce(producer, topic + DELAY_SUFFIX, changes) == offsets(6, first=4)
        arrivals = collect_until(consumer, later + int(NEVER_WAIT_S * 1000))
    assert summary(arrivals) == [
        (0, b"k3", b"0:3"),
        (1, b"k4", b"0:6"),
        (2, b"k1", b"0:9"),
        (3, b"k2", b"0:5"),
    ]
    assert [a.value for a in arrivals] == [
        b"kept",
        b"replaces nothing",
        b"after the cancel",
        b"new",
    ]
    assert arrivals[0].received_ms >= due - CLOCK_SLACK_MS
    assert arrivals[3].headers == (*changes[1].headers, delayed_from(0, 5))


def test_cancel_reaches_every_partition(shared_broker: BrokerProcess) -> None:
    """A cancel applies to the pending records of ``T`` with its key, whichever partition
    of ``T.delay`` they came through."""
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-cancel-across")
    create_topic(bootstrap, topic, partitions=2)
    producer = confluent_producer(bootstrap)
    # Far enough ahead that the status poll below sees both records pending before they
    # are due, even on a loaded machine.
    due = now_ms() + 4000
    records = [
        Outgoing(b"k", b"cancelled", (deliver_at(due),)),
        Outgoing(b"j", b"kept", (deliver_at(due),)),
    ]
    assert produce(producer, topic + DELAY_SUFFIX, records, partition=0) == offsets(2)
    deadline = Deadline()
    while delay_status(shared_broker).get(topic, {}).get("pending") != len(records):
        assert not deadline.expired(), "the records were not scheduled"
        time.sleep(0.05)
    cancel = Outgoing(b"k", None, ((CANCEL, b""),))
    assert produce(producer, topic + DELAY_SUFFIX, [cancel], partition=1) == offsets(1)
    with reader(bootstrap, topic, partitions=(0, 1)) as consumer:
        arrivals = collect_until(consumer, due + int(NEVER_WAIT_S * 1000))
    assert [(a.partition, *summary([a])[0]) for a in arrivals] == [(0, 0, b"j", b"0:1")]


# --------------------------------------------------------------------------------------
# Invalid records: the whole batch refused, nothing stored
# --------------------------------------------------------------------------------------

INVALID_BATCHES: dict[str, Callable[[int], list[Outgoing]]] = {
    "no-headers": lambda now: [Outgoing(b"k", b"v", ())],
    "no-due-header": lambda now: [Outgoing(b"k", b"v", (("trace", b"x"),))],
    "deliver-at-text": lambda now: [Outgoing(b"k", b"v", ((DELIVER_AT, b"tomorrow"),))],
    "deliver-at-empty": lambda now: [Outgoing(b"k", b"v", ((DELIVER_AT, b""),))],
    "deliver-at-null": lambda now: [Outgoing(b"k", b"v", ((DELIVER_AT, None),))],
    "delay-ms-negative": lambda now: [Outgoing(b"k", b"v", ((DELAY_MS, b"-100"),))],
    "delay-ms-fraction": lambda now: [Outgoing(b"k", b"v", ((DELAY_MS, b"1.5"),))],
    "both-headers": lambda now: [Outgoing(b"k", b"v", (deliver_at(now), delay_ms(0)))],
    "cancel-without-key": lambda now: [Outgoing(None, b"v", ((CANCEL, b""),))],
    "replace-without-key": lambda now: [Outgoing(None, b"v", ((REPLACE, b""), deliver_at(now)))],
    "deliver-at-beyond-max": lambda now: [
        Outgoing(b"k", b"v", (deliver_at(now + THREE_YEARS_MS),))
    ],
    "deliver-at-beyond-int64": lambda now: [Outgoing(b"k", b"v", ((DELIVER_AT, b"9" * 20),))],
    "delay-ms-beyond-max": lambda now: [Outgoing(b"k", b"v", (delay_ms(THREE_YEARS_MS),), now)],
    "one-bad-record-in-a-batch": lambda now: [
        Outgoing(b"good", b"1", (deliver_at(now),)),
        Outgoing(b"bad", b"2", ()),
        Outgoing(b"good", b"3", (delay_ms(0),)),
    ],
}


@pytest.mark.parametrize("case", sorted(INVALID_BATCHES))
def test_invalid_batch_is_refused(shared_broker: BrokerProcess, case: str) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-invalid")
    create_topic(bootstrap, topic)
    # linger.ms: a case's records go in one batch, as the refusal of the whole batch needs
    producer = confluent_producer(bootstrap, **{"linger.ms": 100})
    start = now_ms()
    batch = INVALID_BATCHES[case](start)
    assert produce(producer, topic + DELAY_SUFFIX, batch) == [
        (KafkaError.INVALID_RECORD, None)
    ] * len(batch)
    assert shared_broker.is_running()
    valid = Outgoing(b"after", b"valid", (deliver_at(start),))
    # Offset 0 of T.delay: nothing of the refused batch was stored.
    assert produce(producer, topic + DELAY_SUFFIX, [valid]) == offsets(1)
    with reader(bootstrap, topic) as consumer:
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, now_ms() + 100)
    assert summary(arrivals) == [(0, b"after", b"0:0")]


def test_max_delay_setting(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", settings=[f"kshim.delay.max.ms={MAX_DELAY_MS}"])
    broker.start()
    try:
        topic = unique_topic("delay-max")
        create_topic(broker.bootstrap, topic)
        producer = confluent_producer(broker.bootstrap)
        start = now_ms()
        refused = [
            Outgoing(b"k", b"+120 s", (deliver_at(start + 120_000),)),
            Outgoing(b"k", b"+120 s", (delay_ms(120_000),), start),
        ]
        accepted = [
            Outgoing(b"k", b"+30 s", (deliver_at(start + 30_000),)),
            Outgoing(b"k", b"+30 s", (delay_ms(30_000),), start),
        ]
        for record in refused:  # one batch each
            assert produce(producer, topic + DELAY_SUFFIX, [record]) == [
                (KafkaError.INVALID_RECORD, None)
            ]
        for offset, record in enumerate(accepted):
            assert produce(producer, topic + DELAY_SUFFIX, [record]) == [(None, offset)]
        assert broker.is_running()
    finally:
        broker.stop()
    assert failure_lines(broker.log_text()) == []


# --------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------


def test_transactional_records_scheduled_on_commit_only(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-txn")
    create_topic(bootstrap, topic)
    producer = confluent_producer(bootstrap, **{"transactional.id": topic})
    producer.init_transactions(20)
    with reader(bootstrap, topic) as consumer:
        start = now_ms()
        later = start + 2500
        producer.begin_transaction()
        aborted = [
            Outgoing(b"a1", b"aborted, due", (deliver_at(start - 1),)),
            Outgoing(b"a2", b"aborted, later", (deliver_at(later),)),
        ]
        assert produce(producer, topic + DELAY_SUFFIX, aborted) == offsets(2)
        producer.abort_transaction(20)  # its marker at 2
        producer.begin_transaction()
        committed = [
            Outgoing(b"c1", b"committed, due", (deliver_at(start - 1),)),
            Outgoing(b"c2", b"committed, later", (deliver_at(later),)),
        ]
        assert produce(producer, topic + DELAY_SUFFIX, committed) == offsets(2, first=3)
        assert collect_until(consumer, now_ms() + 1000) == []  # open: nothing scheduled
        producer.commit_transaction(20)
        committed_ms = now_ms()
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, later + int(NEVER_WAIT_S * 1000))
    assert summary(arrivals) == [(0, b"c1", b"0:3"), (1, b"c2", b"0:4")]
    assert arrivals[0].received_ms >= committed_ms - CLOCK_SLACK_MS
    assert arrivals[1].received_ms >= later - CLOCK_SLACK_MS


# --------------------------------------------------------------------------------------
# What T.delay answers, and the names it reserves
# --------------------------------------------------------------------------------------


def test_delay_topic_is_write_only_and_unlisted(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-names")
    create_topic(bootstrap, topic, partitions=2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Named, it is created with T's partition count; the listing of all topics leaves it out.
    named = admin.list_topics(topic + DELAY_SUFFIX, timeout=10).topics[topic + DELAY_SUFFIX]
    assert named.error is None and sorted(named.partitions) == [0, 1]
    listed = admin.list_topics(timeout=10).topics
    assert topic in listed and topic + DELAY_SUFFIX not in listed
    missing = unique_topic("delay-missing") + DELAY_SUFFIX  # no T: no companion
    unknown = described_without_creating(bootstrap, missing)
    assert unknown.error is not None
    assert unknown.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([ConfluentTopicPartition(topic + DELAY_SUFFIX, 0, 0)])  # Fetch at 0
        deadline = Deadline()
        while True:
            assert not deadline.expired(), "no error for a Fetch of T.delay"
            message = consumer.poll(deadline.poll_timeout_s())
            if message is None:
                continue
            error = message.error()
            assert error is not None, "a record was read from T.delay"
            assert error.code() == KafkaError.TOPIC_EXCEPTION, error
            break
        with pytest.raises(KafkaException) as listed_offsets:  # ListOffsets
            high_watermark(consumer, topic + DELAY_SUFFIX)
        assert listed_offsets.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    finally:
        consumer.close()

    for name in (unique_topic("x") + DELAY_SUFFIX, topic + DELAY_SUFFIX):
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=20)
        assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION, name
    with pytest.raises(KafkaException) as delete_refused:
        admin.delete_topics([topic + DELAY_SUFFIX])[topic + DELAY_SUFFIX].result(timeout=20)
    assert delete_refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    head = ConfluentTopicPartition(topic + DELAY_SUFFIX, 0, OFFSET_END)
    with pytest.raises(KafkaException) as delete_records_refused:
        admin.delete_records([head])[head].result(timeout=20)
    assert delete_records_refused.value.args[0].code() == KafkaError.POLICY_VIOLATION

    # Described by name, every setting read-only; changes refused.
    companion = ConfigResource(ResourceType.TOPIC, topic + DELAY_SUFFIX)
    configs = admin.describe_configs([companion])[companion].result(timeout=20)
    assert configs and all(entry.is_read_only for entry in configs.values())
    entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
    change = ConfigResource(ResourceType.TOPIC, topic + DELAY_SUFFIX, incremental_configs=[entry])
    with pytest.raises(KafkaException) as alter_refused:
        admin.incremental_alter_configs([change])[change].result(timeout=20)
    assert alter_refused.value.args[0].code() == KafkaError.POLICY_VIOLATION


def test_delay_topic_grows_with_its_topic(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-grow")
    create_topic(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    named = admin.list_topics(topic + DELAY_SUFFIX, timeout=10).topics[topic + DELAY_SUFFIX]
    assert sorted(named.partitions) == [0]
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=20)
    grown = admin.list_topics(topic + DELAY_SUFFIX, timeout=10).topics[topic + DELAY_SUFFIX]
    assert sorted(grown.partitions) == [0, 1, 2]
    with reader(bootstrap, topic, partitions=(0, 1, 2)) as consumer:
        record = Outgoing(b"p2", b"to partition 2", (deliver_at(now_ms()),))
        producer = confluent_producer(bootstrap)
        assert produce(producer, topic + DELAY_SUFFIX, [record], partition=2) == offsets(1)
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, now_ms() + 100)
    assert [(a.partition, *summary([a])[0]) for a in arrivals] == [(2, 0, b"p2", b"2:0")]


# --------------------------------------------------------------------------------------
# The full-data view
# --------------------------------------------------------------------------------------

View = dict[bytes, tuple[int, bytes | None, Headers]]  # key -> (offset, value, headers)


def read_view(consumer: Consumer, topic: str, view: View, deadline: Deadline) -> View:
    """Applies ``T.full`` records to ``view`` until the view has caught up with ``T`` and
    librdkafka reports the end of the view's partition there (test_full_view.py)."""
    while True:
        source = high_watermark(consumer, topic)
        if high_watermark(consumer, topic + ".full") >= source:
            break
        assert not deadline.expired(), "the view did not catch up"

    def apply(message: Message) -> None:
        key, offset = message.key(), message.offset()
        assert key is not None and offset is not None
        view[key] = (offset, message.value(), headers_of(message))

    consume_until_end(consumer, source, deadline, apply)
    return view


@contextlib.contextmanager
def view_reader(bootstrap: str, topic: str) -> Iterator[Consumer]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "isolation.level": "read_committed", "fetch.wait.max.ms": 100,
         "enable.partition.eof": True}
    )  # fmt: skip
    consumer.assign([ConfluentTopicPartition(topic + ".full", 0, OFFSET_BEGINNING)])
    try:
        yield consumer
    finally:
        consumer.close()


def test_full_view_shows_delivered_records(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-full")
    create_topic(bootstrap, topic)
    producer = confluent_producer(bootstrap, **{"enable.idempotence": True})
    direct = [Outgoing(b"a", b"direct", ()), Outgoing(b"b", b"direct", ())]
    assert produce(producer, topic, direct) == offsets(2)
    deadline = Deadline()
    with view_reader(bootstrap, topic) as consumer:  # a view being kept, streaming changes
        view = read_view(consumer, topic, {}, deadline)
        assert view == {b"a": (0, b"direct", ()), b"b": (1, b"direct", ())}
        due = now_ms() + 500
        delayed = [Outgoing(b"a", b"delayed", (deliver_at(due),))]
        assert produce(producer, topic + DELAY_SUFFIX, delayed) == offsets(1)
        while high_watermark(consumer, topic) < 3:
            assert not deadline.expired(), "the delayed record did not arrive"
            time.sleep(0.05)
        view = read_view(consumer, topic, view, deadline)
    expected = {
        b"a": (2, b"delayed", (deliver_at(due), delayed_from(0, 0))),
        b"b": (1, b"direct", ()),
    }
    assert view == expected
    with view_reader(bootstrap, topic) as fresh:  # and a fresh reader of the view
        assert read_view(fresh, topic, {}, deadline) == expected


# --------------------------------------------------------------------------------------
# Restarts: exactly once across kill -9, pending records kept, deleted with their topic
# --------------------------------------------------------------------------------------


def wait_for_kill_moment(watcher: Consumer, topic: str, kill_at: str, due: int) -> None:
    """Returns at the moment to kill the broker: at once (before the due time, the schedule
    perhaps still reading ``T.delay``), when ``T`` has the first delivered batch, or 150 ms
    past the due time."""
    if kill_at == "first-delivery":
        deadline = Deadline()
        while high_watermark(watcher, topic) == 0:
            assert not deadline.expired(), "nothing was delivered"
        assert now_ms() >= due - CLOCK_SLACK_MS, "delivered before the due time"
    elif kill_at == "past-due":
        time.sleep(max(0.0, (due + 150 - now_ms()) / 1000))


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", ["before-due", "first-delivery", "past-due"])
def test_kill_during_dispatch_delivers_each_once(fresh_broker: BrokerProcess, kill_at: str) -> None:
    """20,000 records due at the same moment go out in batches of up to 1000; a kill -9
    (before they are due, when the first batch is in ``T``, or 150 ms past their due
    time) and a restart deliver each exactly once, all in produce order
    (equal due times), none before the due time. Which step the kill interrupted is
    printed (``-s``): a run where delivery had finished first is still valid."""
    topic = unique_topic("delay-kill")
    create_topic(fresh_broker.bootstrap, topic)
    start = now_ms()
    due = start + KILL_DUE_AHEAD_MS
    settings: dict[str, str | int | bool] = {
        "enable.idempotence": True, "acks": "all", "linger.ms": 20, "compression.type": "lz4"
    }  # fmt: skip
    producer = confluent_producer(fresh_broker.bootstrap, **settings)
    for index in range(KILL_RECORDS):
        producer.produce(topic + DELAY_SUFFIX, key=b"k%05d" % index, value=b"v%d" % index,
                         partition=0, headers=[deliver_at(due)])  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0
    produced_ms = now_ms()
    del producer
    watcher = Consumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": "unused"})
    try:
        wait_for_kill_moment(watcher, topic, kill_at, due)
        delivered = high_watermark(watcher, topic)
        fresh_broker.kill()
    finally:
        watcher.close()
    killed_ms = now_ms()
    fresh_broker.start()
    with reader(fresh_broker.bootstrap, topic) as consumer:
        arrivals = collect(consumer, KILL_RECORDS, Deadline(30))
        arrivals += collect_until(consumer, now_ms() + 500)
        assert high_watermark(consumer, topic) == KILL_RECORDS
    sources = [dict(a.headers).get(DELAYED_FROM) for a in arrivals]
    assert len(sources) == len(set(sources)) == KILL_RECORDS  # each exactly once
    assert sources == [f"0:{index}".encode() for index in range(KILL_RECORDS)]
    assert [a.offset for a in arrivals] == list(range(KILL_RECORDS))
    assert [(a.key, a.value) for a in arrivals] == [
        (b"k%05d" % index, b"v%d" % index) for index in range(KILL_RECORDS)
    ]
    assert arrivals[0].received_ms >= due - CLOCK_SLACK_MS
    status = delay_status(fresh_broker)[topic]
    # A delivery found in T at restart has no known lateness: not counted as delivered.
    assert status["pending"] == 0 and 0 < status["delivered"] <= KILL_RECORDS
    log = fresh_broker.log_text()
    settled = [line.split(": ", 1)[-1] for line in log.splitlines() if "was under way" in line]
    print(  # what the kill interrupted
        f"\n{kill_at}: produced in {produced_ms - start} ms (due after {KILL_DUE_AHEAD_MS}), "
        f"killed at due{killed_ms - due:+d} ms with {delivered} of {KILL_RECORDS} in T; "
        f"at restart: {settled or 'no delivery under way'}"
    )
    assert failure_lines(log) == []


def test_far_record_stays_pending_across_restarts(fresh_broker: BrokerProcess) -> None:
    bootstrap = fresh_broker.bootstrap
    topic = unique_topic("delay-far")
    create_topic(bootstrap, topic)
    far_due = now_ms() + ONE_DAY_MS
    far = Outgoing(b"far", b"in a day", (deliver_at(far_due),))
    assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, [far]) == offsets(1)
    deadline = Deadline()
    while topic not in delay_status(fresh_broker):  # read into the schedule
        assert not deadline.expired(), "the record was not scheduled"
        time.sleep(0.05)
    for restart, offset in ((fresh_broker.stop, 1), (fresh_broker.kill, 2)):
        restart()
        fresh_broker.start()
        status = delay_status(fresh_broker)[topic]
        assert (status["pending"], status["next_due_ms"]) == (1, far_due)
        listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        assert topic in listed and topic + DELAY_SUFFIX not in listed
        now = Outgoing(b"now", b"due", (deliver_at(now_ms()),))
        producer = confluent_producer(bootstrap)
        assert produce(producer, topic + DELAY_SUFFIX, [now]) == offsets(1, first=offset)
        with reader(bootstrap, topic) as consumer:
            arrivals = collect(consumer, offset, Deadline())
            arrivals += collect_until(consumer, now_ms() + 1200)  # past a look at the schedule
        assert summary(arrivals) == [
            (index, b"now", f"0:{index + 1}".encode()) for index in range(offset)
        ]
    assert failure_lines(fresh_broker.log_text()) == []


def test_deleting_topic_drops_its_pending_records(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-delete")
    create_topic(bootstrap, topic)
    # Far enough ahead to be still pending when seen: each status read is a `kshim delays`
    # process, which takes a second or more on a loaded machine.
    due = now_ms() + 8000
    pending = [
        Outgoing(b"old", b"1", (deliver_at(due),)),
        Outgoing(b"old", b"2", (deliver_at(due),)),
    ]
    assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, pending) == offsets(2)
    deadline = Deadline()
    while delay_status(shared_broker).get(topic, {}).get("pending") != len(pending):
        assert not deadline.expired(), "the records were not scheduled"
        time.sleep(0.05)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=20)
    assert topic not in delay_status(shared_broker)
    gone = described_without_creating(bootstrap, topic + DELAY_SUFFIX)
    assert gone.error is not None  # the companion went with its topic
    create_topic(bootstrap, topic)
    with reader(bootstrap, topic) as consumer:
        fresh = Outgoing(b"new", b"after recreation", (deliver_at(now_ms()),))
        # T.delay is created anew on being named, from offset 0
        assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, [fresh]) == offsets(1)
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, due + int(NEVER_WAIT_S * 1000))
    assert summary(arrivals) == [(0, b"new", b"0:0")]
