"""Lateness of delayed delivery through ``kshim gateway --delay`` in front of Apache Kafka.

    python -m benchmarks.gateway_delay [--rate 1000] [--seconds 10] [--partitions 4]
        [--repeats 3] [--bootstrap HOST:PORT] [--json benchmarks/results/gateway_delay.json]

One gateway process delivers ``T.delay`` (``--partitions`` partitions) to ``T``. In each
repeat (a fresh topic) the records, ``--rate`` a second falling due over ``--seconds``, are
all produced to ``T.delay`` before the first is due (each with its own ``kshim-deliver-at``);
a read_committed consumer of ``T`` notes when each arrives. Lateness is arrival minus due
time, so it includes the consumer's fetch; per repeat: p50, p99 and the largest, how many
arrived early or more than once (none should), and from the gateway's own metrics
(``kshim_gateway_delay_transaction_seconds``) how many delivery transactions it ran and
their mean duration, the part of the lateness that is Kafka's commit. CPU is of whole process
trees (the gateway's; Kafka's JVM when started here). Without ``--bootstrap``, a Kafka 3.9
from the pinned jars is started for the run. Prints a table and writes the JSON (and
``.md``) beside it.

Target (docs/gateway.md): p99 within 100 ms at 1,000 due records a second, as on the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import statistics
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from benchmarks.brokers import RunningBroker
from kshim.jvm import artifacts
from kshim.testing import GatewayProcess, KafkaProcess, free_port

LEAD_MS = 5_000  # from the start of producing to the first due time
RESULTS = Path("benchmarks/results/gateway_delay.json")
TRANSACTIONS = "kshim_gateway_delay_transaction_seconds"
Sample = dict[str, float]
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


async def measure(bootstrap: str, topic: str, rate: int, seconds: float, partitions: int) -> Sample:
    """One repeat on ``topic``: lateness of every record, by its number."""
    count = int(rate * seconds)
    first_due = now_ms() + LEAD_MS
    dues = [first_due + int(n * 1000 / rate) for n in range(count)]
    reading = asyncio.create_task(arrivals(bootstrap, topic, count, dues[-1] + 30_000))
    await produce(bootstrap, topic, dues, partitions)
    arrived = await reading
    late = sorted(at[0] - dues[number] for number, at in arrived.items())
    copies = Counter(len(at) for at in arrived.values())
    return {
        "records": count,
        "arrived": len(arrived),
        "p50_ms": statistics.median(late) if late else float("nan"),
        "p99_ms": late[min(len(late) - 1, int(len(late) * 0.99))] if late else float("nan"),
        "max_ms": late[-1] if late else float("nan"),
        "early": sum(1 for value in late if value < 0),
        "more_than_once": sum(n for k, n in copies.items() if k > 1),
    }


def scrape(address: str) -> dict[str, float]:
    """The gateway's unlabelled metric values (and histogram sums and counts)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#") and "{" not in line
    }


def repeat(
    bootstrap: str, topic: str, gateway: RunningBroker, kafka: RunningBroker | None,
    metrics: str, arguments: argparse.Namespace,
) -> Sample:  # fmt: skip
    """``topic`` measured, with what the gateway and Kafka spent on it."""
    before, gateway_cpu = scrape(metrics), gateway.cpu_seconds()
    kafka_cpu = kafka.cpu_seconds() if kafka is not None else float("nan")
    sample = asyncio.run(
        measure(bootstrap, topic, arguments.rate, arguments.seconds, arguments.partitions)
    )
    after = scrape(metrics)
    transactions = after[f"{TRANSACTIONS}_count"] - before[f"{TRANSACTIONS}_count"]
    took_s = after[f"{TRANSACTIONS}_sum"] - before[f"{TRANSACTIONS}_sum"]
    sample["transactions"] = transactions
    sample["transaction_mean_ms"] = took_s / transactions * 1000 if transactions else float("nan")
    sample["gateway_cpu_s"] = gateway.cpu_seconds() - gateway_cpu
    sample["kafka_cpu_s"] = kafka.cpu_seconds() - kafka_cpu if kafka is not None else float("nan")
    return sample


def wait_for_takeover(log: Path, topics: list[str], partitions: int) -> None:
    """Until the gateway's log says it delivers every partition of each ``T``.delay."""
    wanted = [
        f"topic='{topic}.delay', partition={p})" for topic in topics for p in range(partitions)
    ]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if TAKEN_OVER in text and all(name in text for name in wanted):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the gateway did not take {topics} over within 60 s")


@contextlib.contextmanager
def kafka(bootstrap: str | None, directory: Path) -> Iterator[tuple[str, RunningBroker | None]]:
    """The cluster: the one named, or a Kafka started here (then measured too)."""
    if bootstrap is not None:
        yield bootstrap, None
        return
    artifacts.resolve("kafka")
    broker = KafkaProcess(directory / "kafka", ["group.initial.rebalance.delay.ms=0"]).start()
    try:
        assert broker.process is not None
        yield broker.bootstrap, RunningBroker("kafka", broker.bootstrap, broker.process.pid, None)
    finally:
        broker.stop()


def run(arguments: argparse.Namespace, directory: Path) -> list[Sample]:
    """One gateway delivering a fresh topic per repeat, created before it starts."""
    with kafka(arguments.bootstrap, directory) as (bootstrap, kafka_broker):
        topics = [f"delay-bench-{uuid.uuid4().hex[:8]}" for _ in range(arguments.repeats)]
        for topic in topics:
            asyncio.run(create_topics(bootstrap, topic, arguments.partitions))
        metrics = f"127.0.0.1:{free_port()}"
        delays = ",".join(f"{topic}.delay" for topic in topics)
        options = ["--delay", "--delay-topics", delays, "--metrics-listen", metrics]
        process = GatewayProcess(directory, bootstrap, options=options).start()
        try:
            assert process.process is not None
            wait_for_takeover(Path(process.log_path), topics, arguments.partitions)
            gateway = RunningBroker("gateway", process.bootstrap, process.process.pid, None)
            return [
                repeat(bootstrap, topic, gateway, kafka_broker, metrics, arguments)
                for topic in topics
            ]
        finally:
            process.stop()


COLUMNS = (
    ("arrived", "arrived", "{:,.0f}"),
    ("p50_ms", "lateness p50, ms", "{:.0f}"),
    ("p99_ms", "lateness p99, ms", "{:.0f}"),
    ("max_ms", "lateness max, ms", "{:.0f}"),
    ("early", "early", "{:.0f}"),
    ("more_than_once", "more than once", "{:.0f}"),
    ("transactions", "delivery transactions", "{:,.0f}"),
    ("transaction_mean_ms", "transaction mean, ms", "{:.1f}"),
    ("gateway_cpu_s", "gateway CPU, s", "{:.2f}"),
    ("kafka_cpu_s", "Kafka CPU, s", "{:.2f}"),
)


def table(samples: list[Sample]) -> list[str]:
    lines = ["| repeat | " + " | ".join(label for _, label, _ in COLUMNS) + " |"]
    lines.append("|---|" + "---:|" * len(COLUMNS))
    rows = [(str(index + 1), sample) for index, sample in enumerate(samples)]
    medians = {key: statistics.median(s[key] for s in samples) for key, _, _ in COLUMNS}
    for label, values in [*rows, ("median", medians)]:
        cells = " | ".join(form.format(values[key]) for key, _, form in COLUMNS)
        lines.append(f"| {label} | {cells} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap")
    parser.add_argument("--json", type=Path, default=RESULTS)
    arguments = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC)
    with tempfile.TemporaryDirectory() as directory:
        samples = run(arguments, Path(directory))
    heading = (
        f"`python -m benchmarks.gateway_delay --rate {arguments.rate} --seconds "
        f"{arguments.seconds:g} --partitions {arguments.partitions} --repeats "
        f"{arguments.repeats}`, {started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs: one "
        "gateway delivering in front of "
        + ("the named cluster" if arguments.bootstrap else "Kafka 3.9 from the pinned jars")
        + "; lateness from due time to arrival at a read_committed consumer; CPU of whole "
        "process trees; target p99 <= 100 ms."
    )
    lines = [heading, "", *table(samples)]
    print("\n".join(lines))
    arguments.json.write_text(json.dumps({"heading": heading, "samples": samples}, indent=2) + "\n")
    arguments.json.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
