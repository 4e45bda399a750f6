"""``T.full`` on kshim's broker and on Apache Kafka through ``kshim gateway --full``, one run.

    python -m benchmarks.gateway_full [--updates 200000] [--keys 10000] [--repeats 3]
                                      [--json benchmarks/results/gateway_full.json]

Each repeat, on each side: ``--updates`` records of 100 B over ``--keys`` keys produced to a
new one-partition topic ``T`` (confluent-kafka, acks=all), then

- **first read**: a new consumer reads ``T.full`` from earliest until it holds every key: on
  the broker the view is built on that first read, through the gateway the view's partition
  is given an owner which builds it from Kafka's ``T``; the time from the first request
  naming ``T.full`` to the last key read, and the records/s of ``T`` that makes;
- **second read**: another new consumer, the view already built;
- **change lag**: 200 updates/s for 5 s produced to ``T`` while a consumer streams ``T.full``:
  produce -> read through the view, p50 and p99;
- CPU of the process trees during the first read: the broker's, or the gateway's (the
  index it builds) and Kafka's JVM.

Prints a Markdown table and writes the JSON (and ``.md``) beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.brokers import RunningBroker, running
from kshim.testing import GatewayProcess

RESULTS = Path("benchmarks/results/gateway_full.json")
SIDES = ("kshim broker", "Kafka + gateway")
LAG_RATE, LAG_SECONDS = 200, 5.0
READ_TIMEOUT_S = 300.0


@contextlib.contextmanager
def full_gateway(upstream: str) -> Iterator[RunningBroker]:
    """One ``kshim gateway --full`` in front of ``upstream``."""
    with tempfile.TemporaryDirectory(prefix="bench-gateway-full-") as directory:
        options = ["--full", "--full-group", f"bench-{uuid.uuid4().hex[:8]}"]
        gateway = GatewayProcess(directory, upstream, options=options).start()
        try:
            assert gateway.process is not None
            yield RunningBroker("gateway", gateway.bootstrap, gateway.process.pid, None,
                                gateway.process)  # fmt: skip
        finally:
            gateway.stop()


def _produce(bootstrap: str, topic: str, updates: int, keys: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = b"v" * 100
    for index in range(updates):
        while True:
            try:
                producer.produce(topic, value=value, key=b"k%d" % (index % keys), partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def _read_view(bootstrap: str, topic: str, keys: int) -> float:
    """Seconds until a new consumer of ``topic``.full from earliest holds ``keys`` keys."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})  # fmt: skip
    started = time.perf_counter()
    # Assigned, not subscribed: a new group's join waits out Kafka's
    # group.initial.rebalance.delay.ms (3 s by default), which is not the view's cost.
    consumer.assign([TopicPartition(f"{topic}.full", 0, OFFSET_BEGINNING)])
    seen: set[bytes] = set()
    try:
        while len(seen) < keys:
            assert time.perf_counter() - started < READ_TIMEOUT_S, f"{len(seen)} keys read"
            for message in consumer.consume(10_000, 0.2):
                key = None if message.error() else message.key()
                if key is not None:
                    seen.add(key)
        return time.perf_counter() - started
    finally:
        consumer.close()


def _change_lag(bootstrap: str, topic: str) -> dict[str, float]:
    """produce -> read through ``topic``.full, ms, at LAG_RATE updates/s."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "latest", "fetch.wait.max.ms": 10})  # fmt: skip
    consumer.assign([TopicPartition(f"{topic}.full", 0, OFFSET_END)])
    consumer.consume(1, 2.0)  # positioned at the end
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    sent: dict[bytes, float] = {}
    lags: list[float] = []
    try:
        for index in range(int(LAG_RATE * LAG_SECONDS)):
            key = b"lag-%d" % index
            sent[key] = time.perf_counter()
            producer.produce(topic, value=b"x", key=key, partition=0)
            producer.poll(0)
            lags += _received(consumer, sent, 1 / LAG_RATE)
        producer.flush(30)
        deadline = time.perf_counter() + 30
        while len(lags) < len(sent) and time.perf_counter() < deadline:
            lags += _received(consumer, sent, 0.1)
    finally:
        consumer.close()
    lags.sort()
    return {"change_lag_p50_ms": statistics.median(lags),
            "change_lag_p99_ms": lags[int(len(lags) * 0.99) - 1]}  # fmt: skip


def _received(consumer: Consumer, sent: dict[bytes, float], wait_s: float) -> list[float]:
    now_lags = []
    for message in consumer.consume(1000, wait_s):
        key = message.key() if not message.error() else None
        if key in sent:
            now_lags.append((time.perf_counter() - sent.pop(key)) * 1000)
    return now_lags


def one_side(produce_to: RunningBroker, view_at: RunningBroker, updates: int, keys: int,
             measured: list[RunningBroker]) -> dict[str, float]:  # fmt: skip
    topic = f"full-{uuid.uuid4().hex[:8]}"
    # At kshim's defaults: the view is built on its first read (docs/full-data-view.md).
    admin = AdminClient({"bootstrap.servers": produce_to.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _produce(produce_to.bootstrap, topic, updates, keys)
    cpu_before = [broker.cpu_seconds() for broker in measured]
    first = _read_view(view_at.bootstrap, topic, keys)
    cpu = [
        broker.cpu_seconds() - before for broker, before in zip(measured, cpu_before, strict=True)
    ]
    second = _read_view(view_at.bootstrap, topic, keys)
    return {
        "first_read_s": first,
        "first_read_source_records_per_s": updates / first,
        "second_read_s": second,
        **_change_lag(view_at.bootstrap, topic),
        **{
            f"cpu_s_first_read_{broker.name}": value
            for broker, value in zip(measured, cpu, strict=True)
        },
    }


def run(updates: int, keys: int, repeats: int) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {side: {} for side in SIDES}
    with contextlib.ExitStack() as stack:
        kshim = stack.enter_context(running("kshim"))
        kafka = stack.enter_context(running("kafka"))
        gateway = stack.enter_context(full_gateway(kafka.bootstrap))
        for repeat in range(repeats):
            for side in SIDES if repeat % 2 == 0 else SIDES[::-1]:
                if side == SIDES[0]:
                    figures = one_side(kshim, kshim, updates, keys, [kshim])
                else:
                    figures = one_side(kafka, gateway, updates, keys, [gateway, kafka])
                for key, value in figures.items():
                    samples[side].setdefault(key, []).append(value)
            print(f"repeat {repeat + 1} of {repeats} done", file=sys.stderr, flush=True)
    return samples


def table(samples: dict[str, dict[str, list[float]]]) -> list[str]:
    keys = list(dict.fromkeys(k for side in SIDES for k in samples[side]))
    lines = ["| metric | kshim broker | Kafka + gateway |", "|---|---:|---:|"]
    for key in keys:
        cells = [samples[side].get(key) for side in SIDES]
        text = [f"{statistics.median(c):,.3g}" if c else "-" for c in cells]
        lines.append(f"| {key} | {text[0]} | {text[1]} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS)
    arguments = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC)
    samples = run(arguments.updates, arguments.keys, arguments.repeats)
    command = "python -m benchmarks.gateway_full " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    heading = (f"`T.full` on kshim's broker and through `kshim gateway --full` on Kafka 3.9, "
               f"{arguments.repeats} repeats, medians; `{command.strip()}`, "
               f"{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load average at the end "
               f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    lines = [heading, "", *table(samples)]
    print("\n".join(lines))
    arguments.json.write_text(json.dumps({"heading": heading, "samples": samples}, indent=2) + "\n")
    arguments.json.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
