"""A consumer group reading a full-data view ``T.full`` with auto-commit, with each Python
client, against a real ``kshim serve``.

The group consumes the view's live records, its client commits their positions on its
own (``enable.auto.commit``) as it would on any topic, and a new member of the group
resumes after them: only records that reached the view later come to it. The view's
last record is live, so every client's position ends at the high watermark (the view's
gaps are inside it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition as AioTopicPartition  # type: ignore[import-untyped]
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KafkaTopicPartition

from kshim.testing import BrokerProcess
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.group_clients import CLIENTS, HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS

pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")
AUTO_COMMIT_INTERVAL_MS = 100
Write = tuple[bytes, bytes]
Consumed = tuple[int, bytes | None]  # (offset, key)
FIRST: list[Write] = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", b"2")]
FIRST_VIEW: list[Consumed] = [(2, b"a"), (3, b"c"), (4, b"b")]  # 0 and 1 were superseded
LATER: list[Write] = [(b"d", b"1"), (b"a", b"3")]
LATER_VIEW: list[Consumed] = [(5, b"d"), (6, b"a")]


class AutoCommitMember(Protocol):
    def poll(self) -> list[Consumed]: ...
    def committed(self) -> int | None: ...
    def close(self) -> None: ...


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=20)


def produce(bootstrap: str, topic: str, writes: Sequence[Write]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in writes:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(20) == 0


def wait_view_at(bootstrap: str, view: str, high_watermark: int) -> None:
    """Waits until the view has applied its topic up to ``high_watermark``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    deadline = Deadline()
    try:
        while True:
            partition = ConfluentTopicPartition(view, 0)
            _, high = consumer.get_watermark_offsets(partition, timeout=5, cached=False)
            if high >= high_watermark:
                return
            assert not deadline.expired(), f"{view} at {high}, not {high_watermark}"
    finally:
        consumer.close()


class KafkaPythonMember:
    def __init__(self, bootstrap: str, view: str, group: str) -> None:
        self._partition = KafkaTopicPartition(view, 0)
        self._consumer = KafkaConsumer(
            view,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        )

    def poll(self) -> list[Consumed]:
        batches = self._consumer.poll(timeout_ms=200)
        return [(r.offset, r.key) for records in batches.values() for r in records]

    def committed(self) -> int | None:
        committed: int | None = self._consumer.committed(self._partition)
        return committed

    def close(self) -> None:
        self._consumer.close()  # commits what was consumed (autocommit)


class AiokafkaMember:
    """aiokafka on an event loop of its own, run while the test calls in: its heartbeats
    and auto-commits happen during the polls."""

    def __init__(self, bootstrap: str, view: str, group: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._partition = AioTopicPartition(view, 0)
        self._consumer: AIOKafkaConsumer = self._run(self._start(bootstrap, view, group))

    @staticmethod
    async def _start(bootstrap: str, view: str, group: str) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(  # made on its loop, which aiokafka takes as its own
            view,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        )
        await consumer.start()
        return consumer

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(asyncio.wait_for(coroutine, 30))

    def poll(self) -> list[Consumed]:
        batches = self._run(self._consumer.getmany(timeout_ms=200))
        return [(r.offset, r.key) for records in batches.values() for r in records]

    def committed(self) -> int | None:
        committed: int | None = self._run(self._consumer.committed(self._partition))
        return committed

    def close(self) -> None:
        try:
            self._run(self._consumer.stop())  # commits what was consumed
        finally:
            self._loop.close()


class ConfluentMember:
    def __init__(self, bootstrap: str, view: str, group: str) -> None:
        self._partition = ConfluentTopicPartition(view, 0)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": AUTO_COMMIT_INTERVAL_MS,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            }
        )
        self._consumer.subscribe([view])

    def poll(self) -> list[Consumed]:
        messages = self._consumer.consume(10, 0.2)
        return [(int(m.offset() or 0), m.key()) for m in messages if m.error() is None]

    def committed(self) -> int | None:
        (partition,) = self._consumer.committed([self._partition], timeout=10)
        return None if partition.offset < 0 else int(partition.offset)

    def close(self) -> None:
        self._consumer.close()  # commits what was consumed


def make_member(client: str, bootstrap: str, view: str, group: str) -> AutoCommitMember:
    if client == "kafka-python":
        return KafkaPythonMember(bootstrap, view, group)
    if client == "aiokafka":
        return AiokafkaMember(bootstrap, view, group)
    return ConfluentMember(bootstrap, view, group)


def consume_and_commit(member: AutoCommitMember, count: int, end: int) -> list[Consumed]:
    """Polls until ``count`` records came and the client's auto-commit has stored ``end``."""
    consumed: list[Consumed] = []
    deadline = Deadline(40)
    while len(consumed) < count:
        assert not deadline.expired(), f"consumed only {consumed}"
        consumed += member.poll()
    while (committed := member.committed()) != end:
        assert not deadline.expired(), f"auto-commit stored {committed}, not {end}"
        consumed += member.poll()  # nothing more; kafka-python auto-commits inside poll
    return consumed


@pytest.mark.parametrize("client", CLIENTS)
def test_group_on_a_view_auto_commits_and_resumes(
    shared_broker: BrokerProcess, client: str
) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("full-group")
    view, group = topic + ".full", topic + "-group"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, FIRST)
    wait_view_at(bootstrap, view, len(FIRST))

    first = make_member(client, bootstrap, view, group)
    try:
        consumed = consume_and_commit(first, len(FIRST_VIEW), len(FIRST))
    finally:
        first.close()
    assert consumed == FIRST_VIEW

    produce(bootstrap, topic, LATER)
    wait_view_at(bootstrap, view, len(FIRST) + len(LATER))
    second = make_member(client, bootstrap, view, group)
    try:
        resumed = consume_and_commit(second, len(LATER_VIEW), len(FIRST) + len(LATER))
    finally:
        second.close()
    assert resumed == LATER_VIEW  # from the committed position, not from the earliest
