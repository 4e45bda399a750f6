"""Lateness of delayed delivery through ``kshim gateway --delay`` in front of Apache Kafka.

    python -m benchmarks.gateway_delay [--rate 1000] [--seconds 10] [--partitions 4]
                                       [--bootstrap HOST:PORT]

One gateway process delivers ``T.delay`` (``--partitions`` partitions) to ``T``. The records,
``--rate`` a second falling due over ``--seconds``, are all produced to ``T.delay`` before the
first is due (each with its own ``kshim-deliver-at``); a read_committed consumer of ``T``
notes when each arrives. Lateness is arrival minus due time, so it includes the consumer's
fetch; it prints p50, p99 and the largest, and how many arrived more than once (none should).
Without ``--bootstrap``, a Kafka 3.9 from the pinned jars is started for the run.

Target (docs/gateway.md): p99 within 100 ms at 1,000 due records a second, as on the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from kshim.jvm import artifacts
from kshim.testing import GatewayProcess, KafkaProcess

LEAD_MS = 5_000  # from the start of producing to the first due time
TAKEN_OVER = "delivering the delayed records of"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def create_topics(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        names = (topic, f"{topic}.delay")
        await admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, dues: list[int], partitions: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [
            await producer.send(
                f"{topic}.delay",
                b"%d" % n,
                partition=n % partitions,
                headers=[("kshim-deliver-at", str(due).encode())],
            )
            for n, due in enumerate(dues)
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def arrivals(
    bootstrap: str, topic: str, expected: int, until_ms: int
) -> dict[int, list[int]]:
    """When each record (by its number) arrived in ``topic``."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, isolation_level="read_committed",
        auto_offset_reset="earliest", fetch_max_wait_ms=10,
    )  # fmt: skip
    await consumer.start()
    arrived: dict[int, list[int]] = {}
    count = 0
    try:
        while count < expected and now_ms() < until_ms:
            batches = await consumer.getmany(timeout_ms=10)
            at = now_ms()
            for records in batches.values():
                for record in records:
                    arrived.setdefault(int(record.value), []).append(at)
                    count += 1
        return arrived
    finally:
        await consumer.stop()


async def measure(bootstrap: str, topic: str, rate: int, seconds: float, partitions: int) -> str:
    count = int(rate * seconds)
    first_due = now_ms() + LEAD_MS
    dues = [first_due + int(n * 1000 / rate) for n in range(count)]
    reading = asyncio.create_task(arrivals(bootstrap, topic, count, dues[-1] + 30_000))
    await produce(bootstrap, topic, dues, partitions)
    produced_ms = now_ms()
    arrived = await reading
    late = sorted(at[0] - dues[number] for number, at in arrived.items())
    copies = Counter(len(at) for at in arrived.values())
    if not late:
        return f"nothing arrived of {count}"
    p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
    return (
        f"{rate}/s over {seconds:g} s, {partitions} partitions: {len(arrived)} of {count} "
        f"arrived (produced {first_due - produced_ms} ms before the first due), lateness "
        f"p50 {statistics.median(late):.0f} ms, p99 {p99} ms, max {late[-1]} ms, "
        f"early {sum(1 for value in late if value < 0)}, more than once "
        f"{sum(n for k, n in copies.items() if k > 1)}"
    )


@contextlib.contextmanager
def kafka(bootstrap: str | None, directory: Path) -> Iterator[str]:
    if bootstrap is not None:
        yield bootstrap
        return
    artifacts.resolve("kafka")
    broker = KafkaProcess(directory / "kafka", ["group.initial.rebalance.delay.ms=0"]).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap")
    arguments = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as directory,
        kafka(arguments.bootstrap, Path(directory)) as bootstrap,
    ):
        topic = f"delay-bench-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topics(bootstrap, topic, arguments.partitions))
        options = ["--delay", "--delay-topics", f"{topic}.delay"]
        gateway = GatewayProcess(directory, bootstrap, options=options).start()
        try:
            deadline = time.monotonic() + 60
            while TAKEN_OVER not in gateway.log_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            rate, seconds = arguments.rate, arguments.seconds
            print(asyncio.run(measure(bootstrap, topic, rate, seconds, arguments.partitions)))
        finally:
            gateway.stop()


if __name__ == "__main__":
    main()
