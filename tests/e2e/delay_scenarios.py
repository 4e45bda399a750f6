"""The delayed-delivery scenarios that give the same verdicts on kshim's broker and through
gateways with ``--delay`` in front of Apache Kafka: each takes the backend it runs against
(tests/e2e/delay_records.py) and asserts what a client sees."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError
from kafka import KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

from tests.e2e.client_helpers import Deadline
from tests.e2e.delay_records import (
    CANCEL,
    CLOCK_SLACK_MS,
    DELAY_SUFFIX,
    DELAYED_FROM,
    INVALID_BATCHES,
    LATE_MS,
    NEVER_WAIT_S,
    ONE_BATCH_LINGER_MS,
    ONE_DAY_MS,
    PENDING_AHEAD_MS,
    REPLACE,
    Arrival,
    DelayBackend,
    Outgoing,
    collect,
    collect_until,
    confluent_producer,
    delay_ms,
    delayed_from,
    deliver_at,
    high_watermark,
    now_ms,
    offsets,
    produce,
    reader,
    summary,
    wait_for_kill_moment,
)

# --------------------------------------------------------------------------------------
# Due times, order and what a delivered record keeps
# --------------------------------------------------------------------------------------


def confluent_records_arrive_in_due_order(backend: DelayBackend) -> None:
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-order")
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
    arrivals = backend.numbered(arrivals)
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


def kafka_python_producer_delivers_per_partition(backend: DelayBackend) -> None:
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-kp", partitions=2)
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
        arrivals = backend.numbered(collect(consumer, 2, Deadline()))
    by_partition = {got.partition: got for got in arrivals}
    assert sorted(by_partition) == [0, 1]
    one, zero = by_partition[1], by_partition[0]
    assert (one.offset, one.key, one.value, one.timestamp_ms) == (0, b"p1", b"in 0.2 s", stamp)
    assert one.headers == (delay_ms(200), delayed_from(1, 0))
    assert one.received_ms >= stamp + 200 - CLOCK_SLACK_MS
    assert (zero.offset, zero.key, zero.value, zero.timestamp_ms) == (0, b"p0", b"now", stamp - 1)
    assert zero.headers == (deliver_at(stamp), delayed_from(0, 0))


def delay_ms_needs_a_timestamp(backend: DelayBackend) -> None:
    """kafka-python can send a record without a timestamp (-1): ``kshim-delay-ms`` has
    nothing to count from, so the batch is refused; ``kshim-deliver-at`` needs none."""
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-no-ts")
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
    arrivals = backend.numbered(arrivals)
    assert summary(arrivals) == [(0, b"k", b"0:0")]
    assert arrivals[0].timestamp_ms == -1


async def aiokafka_producer_delivers(backend: DelayBackend) -> None:
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-aio", partitions=2)
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
    arrivals = backend.numbered(arrivals)
    assert summary(arrivals) == [(0, b"aio", b"1:1"), (1, b"aio", b"1:0")]
    assert [(a.partition, a.value) for a in arrivals] == [(1, b"at once"), (1, b"in 0.4 s")]
    assert arrivals[1].received_ms >= stamp + 400 - CLOCK_SLACK_MS


def log_append_time_topic_stamps_the_delivery(backend: DelayBackend) -> None:
    """A topic with ``message.timestamp.type=LogAppendTime`` stamps a delivered record with
    the time it was appended, as it does any other record."""
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-lat", config={"message.timestamp.type": "LogAppendTime"})
    with reader(bootstrap, topic) as consumer:
        start = now_ms()
        record = Outgoing(b"k", b"v", (deliver_at(start + 500),), start - 10_000)
        assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, [record]) == offsets(1)
        [got] = backend.numbered(collect(consumer, 1, Deadline()))
        assert collect_until(consumer, now_ms() + 100) == []
    assert (got.offset, got.headers) == (0, (*record.headers, delayed_from(0, 0)))
    assert start + 500 - CLOCK_SLACK_MS <= got.timestamp_ms <= got.received_ms + CLOCK_SLACK_MS


# --------------------------------------------------------------------------------------
# Cancel and replace by key
# --------------------------------------------------------------------------------------


def cancel_and_replace_by_key(backend: DelayBackend) -> None:
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-cancel")
    producer = confluent_producer(bootstrap, **{"enable.idempotence": True})
    with reader(bootstrap, topic) as consumer:
        start = now_ms()
        due, later = start + PENDING_AHEAD_MS, start + PENDING_AHEAD_MS + 200
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
            Outgoing(b"k2", b"new", ((REPLACE, b""), deliver_at(due + 100))),  # 5
            Outgoing(b"k4", b"replaces nothing", ((REPLACE, b"yes"), deliver_at(due))),  # 6
            Outgoing(b"k5", b"cancelled by 8", (deliver_at(due),)),  # 7
            Outgoing(b"k5", b"", ((CANCEL, b"any value"), ("trace", b"x"))),  # 8
            Outgoing(b"k1", b"after the cancel", (deliver_at(due),)),  # 9
        ]
        assert produce(producer, topic + DELAY_SUFFIX, changes) == offsets(6, first=4)
        arrivals = backend.numbered(collect_until(consumer, later + int(NEVER_WAIT_S * 1000)))
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


# --------------------------------------------------------------------------------------
# Invalid records: the whole batch refused, nothing stored
# --------------------------------------------------------------------------------------


def invalid_batch_is_refused(backend: DelayBackend, case: str) -> None:
    bootstrap = backend.bootstrap
    topic = backend.topic(f"delay-invalid-{case}")
    producer = confluent_producer(bootstrap, **{"linger.ms": ONE_BATCH_LINGER_MS})  # one batch
    start = now_ms()
    batch = INVALID_BATCHES[case](start)
    assert produce(producer, topic + DELAY_SUFFIX, batch) == [
        (KafkaError.INVALID_RECORD, None)
    ] * len(batch)
    assert backend.is_running()
    valid = Outgoing(b"after", b"valid", (deliver_at(start),))
    # Offset 0 of T.delay: nothing of the refused batch was stored.
    assert produce(producer, topic + DELAY_SUFFIX, [valid]) == offsets(1)
    with reader(bootstrap, topic) as consumer:
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, now_ms() + 100)
    assert summary(backend.numbered(arrivals)) == [(0, b"after", b"0:0")]


# --------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------


def transactional_records_scheduled_on_commit_only(backend: DelayBackend) -> None:
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-txn")
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
    arrivals = backend.numbered(arrivals)
    assert summary(arrivals) == [(0, b"c1", b"0:3"), (1, b"c2", b"0:4")]
    assert arrivals[0].received_ms >= committed_ms - CLOCK_SLACK_MS
    assert arrivals[1].received_ms >= later - CLOCK_SLACK_MS


# --------------------------------------------------------------------------------------
# Restarts: exactly once across kill -9, pending records kept
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KillPlan:
    """``records`` produced round-robin to ``partitions`` partitions, due from ``due_ahead_ms``
    after the start and spread over ``spread_ms`` in produce order; ``crash(topic)`` kills
    what delivers ``topic``'s partition 0 and starts it again."""

    kill_at: str
    records: int
    due_ahead_ms: int
    crash: Callable[[str], None]
    partitions: int = 1
    spread_ms: int = 0


@dataclass(frozen=True, slots=True)
class KillRun:
    """What a kill interrupted: ``delivered`` records of partition 0 in ``T`` at the kill."""

    topic: str
    produced_ms: int
    killed_ms: int
    due: int
    delivered: int


def produce_due_records(backend: DelayBackend, plan: KillPlan, topic: str, due: int) -> None:
    settings: dict[str, str | int | bool] = {
        "enable.idempotence": True, "acks": "all", "linger.ms": 20, "compression.type": "lz4"
    }  # fmt: skip
    producer = confluent_producer(backend.bootstrap, **settings)
    for index in range(plan.records):
        due_at = due + index * plan.spread_ms // plan.records
        producer.produce(
            topic + DELAY_SUFFIX, key=b"k%05d" % index, value=b"v%d" % index,
            partition=index % plan.partitions, headers=[deliver_at(due_at)],
        )  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0


def kill_during_dispatch_delivers_each_once(backend: DelayBackend, plan: KillPlan) -> KillRun:
    """Records due at (or from) one moment; a kill -9 of what delivers them and a restart:
    each arrives exactly once, each partition's in produce order (their due order), none
    before its due time."""
    topic = backend.topic("delay-kill", partitions=plan.partitions)
    start = now_ms()
    due = start + plan.due_ahead_ms
    produce_due_records(backend, plan, topic, due)
    produced_ms = now_ms()
    watcher = Consumer({"bootstrap.servers": backend.bootstrap, "group.id": "unused"})
    try:
        wait_for_kill_moment(watcher, topic, plan.kill_at, due)
        delivered = high_watermark(watcher, topic)
        killed_ms = now_ms()
        plan.crash(topic)
    finally:
        watcher.close()
    with reader(backend.bootstrap, topic, range(plan.partitions)) as consumer:
        arrivals = collect(consumer, plan.records, Deadline(30))
        arrivals += collect_until(consumer, now_ms() + 500)
    assert len(arrivals) == plan.records
    for partition in range(plan.partitions):
        each_once_in_order(backend.numbered(arrivals), plan, partition)
    due_of = {b"k%05d" % i: due + i * plan.spread_ms // plan.records for i in range(plan.records)}
    assert all(a.received_ms >= due_of.get(a.key or b"", due) - CLOCK_SLACK_MS for a in arrivals)
    return KillRun(topic, produced_ms, killed_ms, due, delivered)


def each_once_in_order(arrivals: list[Arrival], plan: KillPlan, partition: int) -> None:
    mine = range(partition, plan.records, plan.partitions)
    got = [a for a in arrivals if a.partition == partition]
    sources = [dict(a.headers).get(DELAYED_FROM) for a in got]
    assert len(sources) == len(set(sources)) == len(mine)  # each exactly once
    assert sources == [f"{partition}:{position}".encode() for position in range(len(mine))]
    assert [a.offset for a in got] == list(range(len(mine)))
    assert [(a.key, a.value) for a in got] == [(b"k%05d" % i, b"v%d" % i) for i in mine]


def far_record_stays_pending_across_restarts(
    backend: DelayBackend, after_restart: Callable[[str], None]
) -> None:
    """A record due in a day is still pending after a clean restart and a kill -9 (and
    ``after_restart(topic)`` holds), while one due now is delivered."""
    bootstrap = backend.bootstrap
    topic = backend.topic("delay-far")
    far_due = now_ms() + ONE_DAY_MS
    far = Outgoing(b"far", b"in a day", (deliver_at(far_due),))
    assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, [far]) == offsets(1)
    deadline = Deadline()
    while backend.pending(topic)[0] == 0:  # read into the schedule
        assert not deadline.expired(), "the record was not scheduled"
        time.sleep(0.05)
    for kill, offset in ((False, 1), (True, 2)):
        backend.restart(kill)
        assert backend.pending(topic) == (1, far_due)
        after_restart(topic)
        now = Outgoing(b"now", b"due", (deliver_at(now_ms()),))
        producer = confluent_producer(bootstrap)
        assert produce(producer, topic + DELAY_SUFFIX, [now]) == offsets(1, first=offset)
        with reader(bootstrap, topic) as consumer:
            arrivals = collect(consumer, offset, Deadline())
            arrivals += collect_until(consumer, now_ms() + 1200)  # past a look at the schedule
        assert summary(backend.numbered(arrivals)) == [
            (index, b"now", f"0:{index + 1}".encode()) for index in range(offset)
        ]
