"""One face for the three Python clients' group consumers, so every scenario runs on each.

Each adapter subscribes to one topic in a group with short timeouts (session 6 s
unless told otherwise, heartbeat 0.5 s). By default it never auto-commits, and commits
its consumed positions when partitions are revoked: the pattern that keeps a record from
being consumed twice across a rebalance. With ``auto_commit`` the client commits on its own
instead (every 100 ms, and when it closes), as an application left to the client's
defaults does. aiokafka runs on one event loop in a background thread, so the
scenarios can drive all clients the same way. A member is used from one thread only
(``MemberThread`` or ``MemberPoller`` in group_helpers).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import TopicPartition as AiokafkaTopicPartition
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

T = TypeVar("T")
CLIENTS = ("kafka-python", "aiokafka", "confluent")
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
AUTO_COMMIT_INTERVAL_MS = 100  # with auto_commit: positions reach the broker soon after a poll
RECORDS_PER_POLL = 2
CALL_TIMEOUT_S = 30.0
CLOSE_REVOKE_TIMEOUT_S = 10.0

Consumed = tuple[int, int]  # (partition, offset)


class Record(NamedTuple):
    """Where a consumed record stands, and its key."""

    partition: int
    offset: int
    key: bytes | None


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member joins with, and how it commits: with ``commit_on_revoke`` it commits
    its consumed positions whenever partitions are taken away, including when it closes;
    with ``auto_commit`` the client commits them on its own, every AUTO_COMMIT_INTERVAL_MS
    and when it closes."""

    bootstrap: str
    topic: str
    group: str
    client_id: str
    commit_on_revoke: bool = True
    auto_commit: bool = False
    session_timeout_ms: int = SESSION_TIMEOUT_MS


class GroupMember(Protocol):
    """A member as the scenarios drive it; the clients' classes below inherit ``poll``."""

    def poll_records(self, timeout_s: float) -> list[Record]: ...
    def assignment(self) -> set[int]: ...
    def committed(self, partition: int) -> int | None: ...  # as the broker has it now
    def commit(self) -> None: ...
    def close(self) -> None: ...

    def poll(self, timeout_s: float) -> list[Consumed]:
        """The (partition, offset) of each record one ``poll_records`` returns."""
        return [(record.partition, record.offset) for record in self.poll_records(timeout_s)]


def make_member(
    client: str,
    bootstrap: str,
    topic: str,
    group: str,
    client_id: str,
    commit_on_revoke: bool = True,
    *,
    auto_commit: bool = False,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
) -> GroupMember:
    """A subscribed consumer of ``client`` (one of CLIENTS); see ``Subscription``."""
    subscription = Subscription(
        bootstrap, topic, group, client_id, commit_on_revoke, auto_commit, session_timeout_ms
    )
    if client == "kafka-python":
        return KafkaPythonMember(subscription)
    if client == "aiokafka":
        return AiokafkaMember(subscription)
    if client == "confluent":
        return ConfluentMember(subscription)
    raise ValueError(client)


class KafkaPythonMember(GroupMember):
    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._consumer = KafkaConsumer(
            bootstrap_servers=subscription.bootstrap,
            group_id=subscription.group,
            client_id=subscription.client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=subscription.auto_commit,
            auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS,
            session_timeout_ms=subscription.session_timeout_ms,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            max_poll_records=RECORDS_PER_POLL,
        )
        consumer = self._consumer

        # kafka-python 3 runs listeners on its IO loop: a blocking commit() would deadlock.
        class CommitOnRevoke(AsyncConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked:
                    await consumer.commit_async()

            async def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        listener = CommitOnRevoke() if subscription.commit_on_revoke else None
        self._consumer.subscribe([subscription.topic], listener=listener)

    def poll_records(self, timeout_s: float) -> list[Record]:
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000))
        return [
            Record(tp.partition, record.offset, record.key)
            for tp, records in batches.items()
            for record in records
        ]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def committed(self, partition: int) -> int | None:
        position = KafkaTopicPartition(self._subscription.topic, partition)
        committed: int | None = self._consumer.committed(position)
        return committed

    def commit(self) -> None:
        self._consumer.commit()

    def close(self) -> None:
        # With auto-commit, kafka-python commits what was consumed before it leaves.
        try:
            self._consumer.close(autocommit=self._subscription.auto_commit)
        finally:
            # When the coordinator's close raises (a commit meeting a rebalance),
            # kafka-python 3.0 returns before closing its network client, whose IO thread
            # would go on reconnecting, after the broker has stopped, for the rest of the
            # test session. Closing the client again is harmless.
            self._consumer._client.close()


class _LoopThread:
    """One asyncio loop in a daemon thread, shared by every aiokafka member."""

    _instance: _LoopThread | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="aiokafka").start()

    @classmethod
    def run(cls, coroutine: Coroutine[Any, Any, T]) -> T:
        with cls._lock:
            if cls._instance is None:
                cls._instance = _LoopThread()
        future = asyncio.run_coroutine_threadsafe(coroutine, cls._instance.loop)
        return future.result(CALL_TIMEOUT_S)


class AiokafkaMember(GroupMember):
    """Its heartbeats and auto-commits run on the shared loop, between the test's calls too."""

    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._consumer: AIOKafkaConsumer = _LoopThread.run(self._start(subscription))

    @staticmethod
    async def _start(subscription: Subscription) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(  # made on the shared loop, which aiokafka takes as its own
            bootstrap_servers=subscription.bootstrap,
            group_id=subscription.group,
            client_id=subscription.client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=subscription.auto_commit,
            auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS,
            session_timeout_ms=subscription.session_timeout_ms,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        )

        class CommitOnRevoke(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked:
                    await consumer.commit()

            async def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        listener = CommitOnRevoke() if subscription.commit_on_revoke else None
        consumer.subscribe([subscription.topic], listener=listener)
        await consumer.start()
        return consumer

    def poll_records(self, timeout_s: float) -> list[Record]:
        batches = _LoopThread.run(
            self._consumer.getmany(timeout_ms=int(timeout_s * 1000), max_records=RECORDS_PER_POLL)
        )
        return [
            Record(tp.partition, record.offset, record.key)
            for tp, records in batches.items()
            for record in records
        ]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def committed(self, partition: int) -> int | None:
        position = AiokafkaTopicPartition(self._subscription.topic, partition)
        committed: int | None = _LoopThread.run(self._consumer.committed(position))
        return committed

    def commit(self) -> None:
        _LoopThread.run(self._consumer.commit())

    def close(self) -> None:
        _LoopThread.run(self._consumer.stop())  # with auto-commit, commits what was consumed


class ConfluentMember(GroupMember):
    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._consumer = Consumer(
            {
                "bootstrap.servers": subscription.bootstrap,
                "group.id": subscription.group,
                "client.id": subscription.client_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": subscription.auto_commit,
                "auto.commit.interval.ms": AUTO_COMMIT_INTERVAL_MS,
                "session.timeout.ms": subscription.session_timeout_ms,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            }
        )
        self._assigned: set[int] = set()
        self._consumer.subscribe(
            [subscription.topic], on_assign=self._on_assign, on_revoke=self._on_revoke
        )

    def _on_assign(self, consumer: Consumer, partitions: list[Any]) -> None:
        self._assigned = {tp.partition for tp in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[Any]) -> None:
        if self._subscription.commit_on_revoke:
            self.commit()
        self._assigned = set()

    def poll_records(self, timeout_s: float) -> list[Record]:
        messages = self._consumer.consume(RECORDS_PER_POLL, timeout_s)
        return [
            Record(int(m.partition() or 0), int(m.offset() or 0), m.key())
            for m in messages
            if m.error() is None
        ]

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def committed(self, partition: int) -> int | None:
        position = ConfluentTopicPartition(self._subscription.topic, partition)
        (committed,) = self._consumer.committed([position], timeout=CALL_TIMEOUT_S)
        return None if committed.offset < 0 else int(committed.offset)  # OFFSET_INVALID: none

    def commit(self) -> None:
        # Nothing consumed since the last commit raises _NO_OFFSET: nothing to do.
        with contextlib.suppress(KafkaException):
            self._consumer.commit(asynchronous=False)

    def close(self) -> None:
        # librdkafka #4884: a revocation first served inside close() runs rd_kafka_assign from
        # the rebalance callback, which can wait forever for the closing consumer while holding
        # the GIL. Leave through unsubscribe() and serve the revocation by polling, then close
        # (with auto-commit, librdkafka commits what was consumed on the way).
        self._consumer.unsubscribe()
        deadline = time.monotonic() + CLOSE_REVOKE_TIMEOUT_S
        while self._assigned and time.monotonic() < deadline:
            self._consumer.poll(0.1)
        self._consumer.close()
