"""Records, clients and waits of the delayed-delivery end-to-end tests, and the backend they
run against: kshim's broker (tests/e2e/test_delayed_delivery.py) or gateways with
``--delay`` in front of Apache Kafka (tests/gateway/test_gateway_delay_e2e.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.client_helpers import Deadline

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
# How far ahead a record is due that must be pending still when a later record (or a change
# to it) is read, after a stall of a second or more on a loaded 2-core machine (a cold
# idempotent producer's first batch alone took half a second here).
PENDING_AHEAD_MS = 3000
# A producer's linger.ms for records that must go in one batch: longer than produce()'s
# flush waits, so that only the flush sends them, which librdkafka does at once. At 100 ms,
# a pause between two produce() calls on a loaded machine sent the first record alone.
ONE_BATCH_LINGER_MS = 60_000
THREE_YEARS_MS = 3 * 365 * 24 * 3600 * 1000
ONE_DAY_MS = 24 * 3600 * 1000

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


def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, config: Mapping[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 1, config=dict(config or {}))
    admin.create_topics([new])[topic].result(timeout=20)


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


class DelayBackend(Protocol):
    """What a delayed-delivery scenario runs against: clients bootstrap to ``bootstrap``."""

    @property
    def bootstrap(self) -> str: ...

    def topic(
        self, label: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        """A topic ``T`` of this test's own, created, whose ``T.delay`` is delivered."""
        ...

    def numbered(self, arrivals: Sequence[Arrival]) -> list[Arrival]:
        """``arrivals`` (all of ``T`` from its start) with the offsets kshim's broker gives."""
        ...

    def is_running(self) -> bool: ...

    def restart(self, kill: bool) -> None:
        """Stops what delivers (kill -9 where ``kill``), starts it again."""
        ...

    def pending(self, topic: str) -> tuple[int, int | None]:
        """(records pending, next due time) of ``topic``'s delayed records."""
        ...


def renumbered(arrivals: Sequence[Arrival]) -> list[Arrival]:
    """``arrivals`` numbered from 0 in each partition in the order they came: the offsets
    of a ``T`` that holds records only, where Kafka's holds the commit marker of each
    transaction that delivered some too (KIP-98)."""
    seen: dict[int, int] = {}
    numbered = []
    for got in arrivals:
        position = seen.get(got.partition, 0)
        seen[got.partition] = position + 1
        numbered.append(dataclasses.replace(got, offset=position))
    return numbered


# Each invalid case of a batch for T.delay: refused whole with INVALID_RECORD.
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


def wait_for_kill_moment(watcher: Consumer, topic: str, kill_at: str, due: int) -> None:
    """Returns at the moment to kill: at once (before the due time, the schedule perhaps
    still reading ``T.delay``), when ``T`` has the first delivered batch, or 150 ms past
    the due time."""
    if kill_at == "first-delivery":
        deadline = Deadline()
        while high_watermark(watcher, topic) == 0:
            assert not deadline.expired(), "nothing was delivered"
        assert now_ms() >= due - CLOCK_SLACK_MS, "delivered before the due time"
    elif kill_at == "past-due":
        time.sleep(max(0.0, (due + 150 - now_ms()) / 1000))
