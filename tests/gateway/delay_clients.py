"""Clients of the upstream Kafka for the gateway's delayed-delivery tests: creating
topics, producing to ``T.delay`` directly (the produce path is the gateway's relay, tested
elsewhere) and reading ``T`` read_committed with the time each record arrived."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from kshim.testing import GatewayProcess

DELIVER_AT = "kshim-deliver-at"
DELAYED_FROM = "kshim-delayed-from"
TAKEN_OVER = "delivering the delayed records of"
WAIT_S = 20.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ToProduce:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    partition: int = 0


@dataclass(frozen=True)
class Arrived:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    arrived_ms: int

    def header(self, name: str) -> bytes | None:
        return dict(self.headers).get(name)


def due_at(due_ms: int) -> tuple[str, bytes]:
    return (DELIVER_AT, str(due_ms).encode())


async def create_topics(bootstrap: str, topics: Sequence[str], partitions: int) -> None:
    """Each of ``topics`` and its ``.delay``, with ``partitions`` partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        names = [*topics, *(f"{topic}.delay" for topic in topics)]
        await admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, records: Sequence[ToProduce]) -> list[int]:
    """The offsets ``records`` got in ``topic``, produced in order."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        offsets = []
        for record in records:
            sent = await producer.send_and_wait(
                topic, record.value, key=record.key, partition=record.partition,
                headers=list(record.headers),
            )  # fmt: skip
            offsets.append(sent.offset)
        return offsets
    finally:
        await producer.stop()


async def read_arrivals(
    bootstrap: str, topic: str, expected: int, linger_s: float, wait_s: float = WAIT_S
) -> list[Arrived]:
    """``topic``'s records read_committed until ``expected`` have arrived (or ``wait_s``),
    then ``linger_s`` more, so that one too many shows."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, isolation_level="read_committed",
        auto_offset_reset="earliest", fetch_max_wait_ms=50,
    )  # fmt: skip
    await consumer.start()
    arrived: list[Arrived] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    try:
        while loop.time() < deadline:
            batches = await consumer.getmany(timeout_ms=50)
            at = now_ms()
            for records in batches.values():
                arrived += [
                    Arrived(r.key, r.value, tuple(r.headers), r.timestamp, at) for r in records
                ]
            if len(arrived) >= expected:
                deadline = min(deadline, loop.time() + linger_s)
        return arrived
    finally:
        await consumer.stop()


def wait_for_log(gateway: GatewayProcess, text: str, count: int = 1) -> None:
    """Until ``text`` shows ``count`` times in the gateway's log; raises TimeoutError."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if gateway.log_text().count(text) >= count:
            return
        time.sleep(0.05)
    raise TimeoutError(f"{text!r} not in the gateway's log:\n{gateway.log_tail()}")


def delay_gateway(
    log_dir: str,
    upstream: str,
    group: str,
    topics: Sequence[str],
    metrics_listen: str | None = None,
) -> GatewayProcess:
    """A gateway delivering ``topics`` (T.delay names) in ``group``, which notices a dead
    member within a second; serving its metrics at ``metrics_listen`` when given."""
    options = ["--delay", "--delay-group", group, "--delay-topics", ",".join(topics)]
    options += ["--delay-session-timeout-ms", "1000"]
    if metrics_listen is not None:
        options += ["--metrics-listen", metrics_listen]
    return GatewayProcess(log_dir, upstream, options=options)
