"""Delayed delivery under load: what a producer of delayed records, the broker and a
consumer of ``T`` see.

    python -m benchmarks.delays [--backlog 500000] [--burst 100000] [--steady-rate 1000]
                                [--steady-seconds 10] [--record-bytes 100] [--json PATH]

On one kshim broker (fsync on, default settings; the whole process tree counted in every
CPU and RSS figure), confluent-kafka producing with acks=all:

- backlog: ``--backlog`` records produced to ``T.delay`` due a day ahead, and as many to
  a plain topic, side by side: produce rate, broker CPU per record (the delayed ones are
  also read into the schedule), RSS before and after and per pending record (the schedule
  is on disk: memory must not grow with the records pending), the schedule's disk use;
- burst: ``--burst`` records due at one moment a few seconds after they are all
  acknowledged: delivery rate into ``T`` and lateness (a consumer's receive time minus
  the due time) p50/p99/max, every record received exactly once;
- steady: ``--steady-rate`` records/s for ``--steady-seconds``, each due 500 ms after it
  is produced, while the backlog stays pending: lateness p50/p99/max as a consumer of
  ``T`` sees it, and the broker's RSS meanwhile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.brokers import RunningBroker, running, sampled
from benchmarks.workloads import TIMEOUT_S, create_topic

DAY_MS = 24 * 3600 * 1000
BURST_LEAD_S = 3.0  # the burst is due this long after its last record is acknowledged
STEADY_DELAY_MS = 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=500_000)
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--steady-rate", type=int, default=1000)
    parser.add_argument("--steady-seconds", type=float, default=10.0)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--json", default="benchmarks/results/delays.json")
    arguments = parser.parse_args()
    with running("kshim") as broker:
        results = run(broker, arguments)
    print(render(results))
    Path(arguments.json).write_text(json.dumps(results, indent=2) + "\n")


def run(broker: RunningBroker, arguments: argparse.Namespace) -> dict[str, Any]:
    create_topic(broker, "plain")
    create_topic(broker, "orders")
    payload = b"x" * arguments.record_bytes
    idle_rss = broker.rss_bytes()
    results: dict[str, Any] = {
        "command": "python -m benchmarks.delays",
        "arguments": vars(arguments),
    }
    results["plain"] = _produce_timed(broker, "plain", arguments.backlog, payload, None)
    far = _now_ms() + DAY_MS
    results["backlog"] = _produce_timed(broker, "orders.delay", arguments.backlog, payload, far)
    results["backlog"].update(
        idle_rss_mb=idle_rss / 1e6,
        rss_after_mb=broker.rss_bytes() / 1e6,
        rss_bytes_per_pending=(broker.rss_bytes() - idle_rss) / arguments.backlog,
        schedule_disk_mb=_disk_bytes(Path(str(broker.data_dir)) / "delays") / 1e6,
    )
    results["burst"] = _burst(broker, arguments.burst, payload)
    results["steady"] = _steady(broker, arguments, payload)
    return results


def _produce_timed(
    broker: RunningBroker, topic: str, count: int, payload: bytes, due_ms: int | None
) -> dict[str, Any]:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    headers: list[tuple[str, str | bytes | None]] | None = None
    if due_ms is not None:
        headers = [("kshim-deliver-at", str(due_ms).encode())]
    with sampled(broker) as usage:
        started = time.perf_counter()
        for index in range(count):
            _send(producer, topic, payload, str(index).encode(), headers)
        if producer.flush(TIMEOUT_S):
            raise RuntimeError(f"{topic}: records not acknowledged")
        elapsed = time.perf_counter() - started
        time.sleep(1.0)  # the schedule reads what was acknowledged: count its CPU too
    return {
        "records_per_s": count / elapsed,
        "broker_cpu_us_per_record": usage.cpu_seconds * 1e6 / count,
        "peak_rss_mb": usage.peak_rss_bytes / 1e6,
    }


def _burst(broker: RunningBroker, count: int, payload: bytes) -> dict[str, Any]:
    """``count`` records due together, shortly after the last is acknowledged."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    # Due a little after the produce is expected to end (at ~50,000 records/s).
    due_ms = _now_ms() + int((count / 50_000 + BURST_LEAD_S) * 1000)
    headers: list[tuple[str, str | bytes | None]] = [("kshim-deliver-at", str(due_ms).encode())]
    with _Arrivals(broker, "orders", count) as arrivals, sampled(broker) as usage:
        for index in range(count):
            _send(producer, "orders.delay", payload, f"burst-{index}".encode(), headers)
        if producer.flush(TIMEOUT_S):
            raise RuntimeError("burst: records not acknowledged")
        acknowledged_before_due_ms = due_ms - _now_ms()
        arrivals.wait(due_ms / 1000 + TIMEOUT_S)
    sources = {source for source, _, _ in arrivals.received}
    lateness = [received - due_ms for _, _, received in arrivals.received]
    spread_s = (max(lateness) - min(lateness)) / 1000 if lateness else 0.0
    return {
        "records": count,
        "acknowledged_ms_before_due": acknowledged_before_due_ms,
        "received": len(arrivals.received),
        "distinct_delayed_from": len(sources),
        "delivery_records_per_s": count / max(spread_s, 1e-3),
        **_lateness(lateness),
        "broker_cpu_us_per_record": usage.cpu_seconds * 1e6 / count,
        "peak_rss_mb": usage.peak_rss_bytes / 1e6,
    }


def _steady(broker: RunningBroker, arguments: argparse.Namespace, payload: bytes) -> dict[str, Any]:
    """A paced stream, each record due STEADY_DELAY_MS after it is sent."""
    count = int(arguments.steady_rate * arguments.steady_seconds)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    due: dict[bytes, int] = {}
    with _Arrivals(broker, "orders", count) as arrivals, sampled(broker) as usage:
        started = time.perf_counter()
        for index in range(count):
            time.sleep(max(0.0, started + index / arguments.steady_rate - time.perf_counter()))
            key = f"steady-{index}".encode()
            due[key] = _now_ms() + STEADY_DELAY_MS
            headers: list[tuple[str, str | bytes | None]] = [
                ("kshim-deliver-at", str(due[key]).encode())
            ]
            _send(producer, "orders.delay", payload, key, headers)
        producer.flush(TIMEOUT_S)
        arrivals.wait(time.time() + TIMEOUT_S)
    lateness = [received - due[key] for _, key, received in arrivals.received]
    return {
        "records": count,
        "received": len(arrivals.received),
        **_lateness(lateness),
        "peak_rss_mb": usage.peak_rss_bytes / 1e6,
        "broker_cpu_us_per_record": usage.cpu_seconds * 1e6 / count,
    }


class _Arrivals:
    """A consumer of ``topic`` from its current end, in a thread: (kshim-delayed-from, key,
    receive time ms) of each record delivered while the block runs, up to ``count``."""

    def __init__(self, broker: RunningBroker, topic: str, count: int) -> None:
        self._consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "bench-delays",
             "enable.auto.commit": False, "fetch.wait.max.ms": 10}
        )  # fmt: skip
        _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        self._consumer.assign([TopicPartition(topic, 0, high)])
        self._count = count
        self.received: list[tuple[bytes, bytes, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Arrivals:
        self._thread.start()
        return self

    def _run(self) -> None:
        while len(self.received) < self._count and not self._stop.is_set():
            for message in self._consumer.consume(10_000, 0.05):
                if message.error() is None:
                    now = _now_ms()
                    source = dict(message.headers() or []).get("kshim-delayed-from")
                    self.received.append((_as_bytes(source), message.key() or b"", now))

    def wait(self, until_epoch_s: float) -> None:
        """Until every record arrived or the wall clock passes ``until_epoch_s``."""
        self._thread.join(max(0.0, until_epoch_s - time.time()))

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


def _as_bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""


def _send(
    producer: Producer,
    topic: str,
    value: bytes,
    key: bytes,
    headers: list[tuple[str, str | bytes | None]] | None,
) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, headers=headers)
            break
        except BufferError:
            producer.poll(0.001)
    producer.poll(0)


def _lateness(lateness_ms: list[int]) -> dict[str, float]:
    if not lateness_ms:
        return {}
    ordered = sorted(lateness_ms)
    return {
        "lateness_p50_ms": statistics.median(ordered),
        "lateness_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "lateness_max_ms": ordered[-1],
        "early": sum(1 for late in ordered if late < 0),
    }


def _disk_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def render(results: dict[str, Any]) -> str:
    lines = ["| workload | measurement | value |", "|---|---|---|"]
    for workload in ("plain", "backlog", "burst", "steady"):
        for name, value in results[workload].items():
            shown = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"
            lines.append(f"| {workload} | {name} | {shown} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
