"""One face for the three Python clients' group consumers, so every scenario runs on each.

Each adapter subscribes to one topic in a group with short timeouts (session
6 s, heartbeat 0.5 s), never auto-commits, and commits its consumed positions
when partitions are revoked: the pattern that keeps a record from being
consumed twice across a rebalance. aiokafka runs on one event loop in a
background thread, so the scenarios can drive all clients the same way.
A member is used from one thread only (``MemberThread`` in group_helpers).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from confluent_kafka import Consumer, KafkaException
from kafka import AsyncConsumerRebalanceListener, KafkaConsumer

T = TypeVar("T")
CLIENTS = ("kafka-python", "aiokafka", "confluent")
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
RECORDS_PER_POLL = 2
CALL_TIMEOUT_S = 30.0
CLOSE_REVOKE_TIMEOUT_S = 10.0

Consumed = tuple[int, int]  # (partition, offset)


class GroupMember(Protocol):
    def poll(self, timeout_s: float) -> list[Consumed]: ...
    def assignment(self) -> set[int]: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...


def make_member(
    client: str,
    bootstrap: str,
    topic: str,
    group: str,
    client_id: str,
    commit_on_revoke: bool = True,
) -> GroupMember:
    """A subscribed consumer of ``client`` (one of CLIENTS).

    With ``commit_on_revoke`` it commits its consumed positions whenever partitions
    are taken away, including when it closes.
    """
    if client == "kafka-python":
        return KafkaPythonMember(bootstrap, topic, group, client_id, commit_on_revoke)
    if client == "aiokafka":
        return AiokafkaMember(bootstrap, topic, group, client_id, commit_on_revoke)
    if client == "confluent":
        return ConfluentMember(bootstrap, topic, group, client_id, commit_on_revoke)
    raise ValueError(client)


class KafkaPythonMember:
    def __init__(
        self, bootstrap: str, topic: str, group: str, client_id: str, commit_on_revoke: bool
    ) -> None:
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
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

        listener = CommitOnRevoke() if commit_on_revoke else None
        self._consumer.subscribe([topic], listener=listener)

    def poll(self, timeout_s: float) -> list[Consumed]:
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000))
        return [
            (tp.partition, record.offset) for tp, records in batches.items() for record in records
        ]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def commit(self) -> None:
        self._consumer.commit()

    def close(self) -> None:
        self._consumer.close(autocommit=False)


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


class AiokafkaMember:
    def __init__(
        self, bootstrap: str, topic: str, group: str, client_id: str, commit_on_revoke: bool
    ) -> None:
        self._consumer: AIOKafkaConsumer = _LoopThread.run(
            self._start(bootstrap, topic, group, client_id, commit_on_revoke)
        )

    @staticmethod
    async def _start(
        bootstrap: str, topic: str, group: str, client_id: str, commit_on_revoke: bool
    ) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        )

        class CommitOnRevoke(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked:
                    await consumer.commit()

            async def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        consumer.subscribe([topic], listener=CommitOnRevoke() if commit_on_revoke else None)
        await consumer.start()
        return consumer

    def poll(self, timeout_s: float) -> list[Consumed]:
        batches = _LoopThread.run(
            self._consumer.getmany(timeout_ms=int(timeout_s * 1000), max_records=RECORDS_PER_POLL)
        )
        return [
            (tp.partition, record.offset) for tp, records in batches.items() for record in records
        ]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def commit(self) -> None:
        _LoopThread.run(self._consumer.commit())

    def close(self) -> None:
        _LoopThread.run(self._consumer.stop())


class ConfluentMember:
    def __init__(
        self, bootstrap: str, topic: str, group: str, client_id: str, commit_on_revoke: bool
    ) -> None:
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": client_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            }
        )
        self._assigned: set[int] = set()
        self._commit_on_revoke = commit_on_revoke
        self._consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[Any]) -> None:
        self._assigned = {tp.partition for tp in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[Any]) -> None:
        if self._commit_on_revoke:
            self.commit()
        self._assigned = set()

    def poll(self, timeout_s: float) -> list[Consumed]:
        messages = self._consumer.consume(RECORDS_PER_POLL, timeout_s)
        return [
            (int(m.partition() or 0), int(m.offset() or 0)) for m in messages if m.error() is None
        ]

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def commit(self) -> None:
        # Nothing consumed since the last commit raises _NO_OFFSET: nothing to do.
        with contextlib.suppress(KafkaException):
            self._consumer.commit(asynchronous=False)

    def close(self) -> None:
        # librdkafka #4884: a revocation first served inside close() runs rd_kafka_assign from
        # the rebalance callback, which can wait forever for the closing consumer while holding
        # the GIL. Leave through unsubscribe() and serve the revocation by polling, then close.
        self._consumer.unsubscribe()
        deadline = time.monotonic() + CLOSE_REVOKE_TIMEOUT_S
        while self._assigned and time.monotonic() < deadline:
            self._consumer.poll(0.1)
        self._consumer.close()
