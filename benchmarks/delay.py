"""Delayed delivery under load, in the shapes its users run: what a producer of delayed
records, the broker and a consumer of ``T`` see.

    python -m benchmarks.delay [--spread 1000000] [--spread-minutes 10] [--lead-s 60]
                               [--plain-rate 5000] [--burst 200000] [--pending 10000000]
                               [--record-bytes 100] [--skip PART ...] [--json PATH]

One kshim broker per part (fsync on, default settings; the whole process tree counted in
every CPU and RSS figure), confluent-kafka producing with acks=all, ``T`` created with
message.timestamp.type=LogAppendTime so that each delivered record carries the time it
was appended to ``T`` (lateness = that time minus the due time in its header):

- rates: ``--spread`` records to a plain topic, then as many to ``T.delay``, each as fast
  as the producer goes: records/s acknowledged and until the schedule holds them all
  (the scheduling rate), side by side with the plain rate of the same run;
- spread: those delayed records are due uniformly over ``--spread-minutes`` starting
  ``--lead-s`` after the produce began; while they fall due a plain producer writes
  ``--plain-rate`` records/s to another topic: lateness p50/p99/max of every record,
  each received exactly once, RSS meanwhile (``--skip spread`` stops after the rates,
  which take a few minutes where this takes the whole window; ``--skip rates spread``
  skips both);
- burst: ``--burst`` records due in the same millisecond, shortly after they are all
  acknowledged: lateness p50/p99/max and the dispatch rate (records / latest lateness);
- pending: ``--pending`` records due between a day and two years ahead (uniform): the
  scheduling rate, RSS peak and at rest, the schedule's disk against the records' own
  bytes (as stored in ``T.delay``), then kill -9 of the tree and a restart on the same
  data: time to the first answer, and every record still pending.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.brokers import RunningBroker, running, sampled
from benchmarks.workloads import TIMEOUT_S, Headers, create_topic, send
from kshim.storage.schedule.delay_store import DelayStore

DAY_MS = 24 * 3600 * 1000
YEAR_MS = 365 * DAY_MS
BURST_LEAD_S = 3.0  # the burst is due this long after its last record is acknowledged
SCHEDULED_TIMEOUT_S = 1800.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spread", type=int, default=1_000_000)
    parser.add_argument("--spread-minutes", type=float, default=10.0)
    parser.add_argument("--lead-s", type=float, default=60.0)
    parser.add_argument("--plain-rate", type=int, default=5000)
    parser.add_argument("--burst", type=int, default=200_000)
    parser.add_argument("--pending", type=int, default=10_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parts = ["rates", "spread", "burst", "pending"]
    parser.add_argument("--skip", nargs="*", default=[], choices=parts)
    parser.add_argument("--json", default="benchmarks/results/delay.json")
    arguments = parser.parse_args()
    results: dict[str, Any] = {"command": "python -m benchmarks.delay"}
    results["arguments"] = vars(arguments)
    payload = b"x" * arguments.record_bytes
    if not {"rates", "spread"} <= set(arguments.skip):
        with running("kshim") as broker:
            results.update(spread(broker, arguments, payload))
    if "burst" not in arguments.skip:
        with running("kshim") as broker:
            results["burst"] = burst(broker, arguments.burst, payload)
    if "pending" not in arguments.skip:
        results["pending"] = pending(arguments.pending, payload)
    print(render(results))
    Path(arguments.json).write_text(json.dumps(results, indent=2) + "\n")
    if "spread" in results:
        plot(results, Path(arguments.json).with_suffix(".png"))


def spread(broker: RunningBroker, arguments: argparse.Namespace, payload: bytes) -> dict[str, Any]:
    create_topic(broker, "plain")
    _create_log_append_time_topic(broker, "orders")
    count = arguments.spread
    results = {"plain": _produce(broker, "plain", count, payload, lambda _: None)}
    first_due = _now_ms() + int(arguments.lead_s * 1000)
    window_ms = int(arguments.spread_minutes * 60_000)
    due_of = [first_due + index * window_ms // count for index in range(count)]
    random.Random(7).shuffle(due_of)  # produced in random due order, like real timeouts
    with _Arrivals(broker, "orders", count) as arrivals:
        results["delayed"] = _produce(broker, "orders.delay", count, payload, due_of.__getitem__)
        results["delayed"]["scheduling_ratio_to_plain"] = (
            results["delayed"]["scheduled_records_per_s"] / results["plain"]["records_per_s"]
        )
        if "spread" in arguments.skip:
            return results
        with (
            _Paced(broker, "plain", arguments.plain_rate, payload) as paced,
            sampled(broker, interval_s=1.0) as usage,
        ):
            arrivals.wait((first_due + window_ms) / 1000 + TIMEOUT_S)
    lateness = [appended - due for _, due, appended in arrivals.received]
    results["spread"] = {
        "records": count,
        "received": len(arrivals.received),
        "distinct_delayed_from": len({source for source, _, _ in arrivals.received}),
        "plain_records_meanwhile": paced.sent,
        **_lateness(lateness),
        "histogram_ms": _histogram(lateness),
        "broker_cpu_s": usage.cpu_seconds,
        "peak_rss_mb": usage.peak_rss_bytes / 1e6,
    }
    return results


def burst(broker: RunningBroker, count: int, payload: bytes) -> dict[str, Any]:
    """``count`` records due together, shortly after the last is acknowledged."""
    _create_log_append_time_topic(broker, "orders")
    due_ms = _now_ms() + int((count / 50_000 + BURST_LEAD_S) * 1000)
    with _Arrivals(broker, "orders", count) as arrivals:
        produced = _produce(broker, "orders.delay", count, payload, lambda _: due_ms)
        acknowledged_before_due_ms = due_ms - _now_ms()
        with sampled(broker) as usage:
            arrivals.wait(due_ms / 1000 + TIMEOUT_S)
    lateness = [appended - due for _, due, appended in arrivals.received]
    return {
        "records": count,
        "scheduled_records_per_s": produced["scheduled_records_per_s"],
        "acknowledged_ms_before_due": acknowledged_before_due_ms,
        "received": len(arrivals.received),
        "distinct_delayed_from": len({source for source, _, _ in arrivals.received}),
        "dispatch_records_per_s": count / max(max(lateness, default=0) / 1000, 1e-3),
        **_lateness(lateness),
        "histogram_ms": _histogram(lateness),
        "broker_cpu_us_per_record": usage.cpu_seconds * 1e6 / count,
        "peak_rss_mb": usage.peak_rss_bytes / 1e6,
    }


def pending(count: int, payload: bytes) -> dict[str, Any]:
    """``count`` records due a day to two years ahead; kill -9 and a restart."""
    rng = random.Random(11)
    now = _now_ms()
    due_of = [now + DAY_MS + rng.randrange(2 * YEAR_MS - 2 * DAY_MS) for _ in range(count)]
    with tempfile.TemporaryDirectory(prefix="bench-delay-") as data_dir:
        with running("kshim", data_dir=data_dir) as broker:
            create_topic(broker, "far")
            idle_rss = broker.rss_bytes()
            results = _produce(broker, "far.delay", count, payload, due_of.__getitem__)
            time.sleep(5.0)  # at rest: what a broker holding the schedule keeps resident
            results.update(
                idle_rss_before_mb=idle_rss / 1e6,
                rss_at_rest_mb=broker.rss_bytes() / 1e6,
                schedule_disk_mb=_disk_bytes(Path(data_dir) / "delays") / 1e6,
                records_disk_mb=_disk_bytes(Path(data_dir) / "logs" / "far.delay-0") / 1e6,
            )
            results["disk_ratio_to_records"] = (
                results["schedule_disk_mb"] / results["records_disk_mb"]
            )
            broker.kill_tree()
        with running("kshim", data_dir=data_dir) as restarted:
            results["first_answer_after_kill_s"] = restarted.ready_s
            results["pending_after_restart"] = _pending(restarted, "far")
            results["rss_after_restart_mb"] = restarted.rss_bytes() / 1e6
    return results


def _produce(
    broker: RunningBroker, topic: str, count: int, payload: bytes, due_of: Any
) -> dict[str, Any]:
    """Produces ``count`` records as fast as the producer goes (``due_of(index)``: the
    record's kshim-deliver-at, or None for none); for a delay topic, also waits until the
    schedule holds them all."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    target = topic.removesuffix(".delay")
    before = _pending(broker, target) if topic != target else 0
    with sampled(broker) as usage:
        started = time.perf_counter()
        for index in range(count):
            due = due_of(index)
            headers: Headers | None = None
            if due is not None:
                headers = [("kshim-deliver-at", str(due).encode())]
            send(producer, topic, payload, f"{index}".encode(), headers)
        if producer.flush(TIMEOUT_S):
            raise RuntimeError(f"{topic}: records not acknowledged")
        acknowledged_s = time.perf_counter() - started
        scheduled_s = acknowledged_s
        if topic != target:
            _wait_pending(broker, target, before + count, started)
            scheduled_s = time.perf_counter() - started
    return {
        "records_per_s": count / acknowledged_s,
        "scheduled_records_per_s": count / scheduled_s,
        "broker_cpu_us_per_record": usage.cpu_seconds * 1e6 / count,
        "peak_rss_mb": usage.peak_rss_bytes / 1e6,
    }


def _pending(broker: RunningBroker, topic: str) -> int:
    """Records pending for ``topic``, read from the running broker's schedule (LMDB lets
    another process read while the broker writes)."""
    store = DelayStore(str(Path(str(broker.data_dir)) / "delays"), readonly=True)
    if not store.exists:
        return 0
    try:
        summary = store.summary().get(topic)
    finally:
        store.close()
    return 0 if summary is None else summary.pending


def _wait_pending(broker: RunningBroker, topic: str, wanted: int, started: float) -> None:
    while _pending(broker, topic) < wanted:
        if time.perf_counter() - started > SCHEDULED_TIMEOUT_S:
            raise TimeoutError(f"{topic}: the schedule never held {wanted} records")
        time.sleep(0.05)


class _Arrivals:
    """A consumer of ``topic`` from its current end, in a thread: (kshim-delayed-from,
    due time, append time) of each record delivered while the block runs, up to
    ``count``."""

    def __init__(self, broker: RunningBroker, topic: str, count: int) -> None:
        self._consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "bench-delay",
             "enable.auto.commit": False, "fetch.wait.max.ms": 10}
        )  # fmt: skip
        _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        self._consumer.assign([TopicPartition(topic, 0, high)])
        self._count = count
        self.received: list[tuple[bytes, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Arrivals:
        self._thread.start()
        return self

    def _run(self) -> None:
        while len(self.received) < self._count and not self._stop.is_set():
            for message in self._consumer.consume(10_000, 0.05):
                if message.error() is None:
                    headers = dict(message.headers() or [])
                    due = int(_as_bytes(headers.get("kshim-deliver-at")))
                    source = _as_bytes(headers.get("kshim-delayed-from"))
                    self.received.append((source, due, message.timestamp()[1]))

    def wait(self, until_epoch_s: float) -> None:
        """Until every record arrived or the wall clock passes ``until_epoch_s``."""
        self._thread.join(max(0.0, until_epoch_s - time.time()))

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


class _Paced:
    """A plain producer writing ``rate`` records/s to ``topic`` in a thread while the
    block runs."""

    def __init__(self, broker: RunningBroker, topic: str, rate: int, payload: bytes) -> None:
        self._producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5}
        )
        self._topic, self._rate, self._payload = topic, rate, payload
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Paced:
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.perf_counter()
        while not self._stop.is_set():
            due = int((time.perf_counter() - started) * self._rate)
            while self.sent < due:
                send(self._producer, self._topic, self._payload, b"plain")
                self.sent += 1
            self._stop.wait(0.01)
        self._producer.flush(TIMEOUT_S)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _create_log_append_time_topic(broker: RunningBroker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"message.timestamp.type": "LogAppendTime", "kshim.full.view": "false"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(TIMEOUT_S)


def _as_bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""


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


HISTOGRAM_BOUNDS_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def _histogram(lateness_ms: list[int]) -> dict[str, int]:
    """Records per lateness bucket: "<=b" for each bound, then ">last"."""
    counts = {f"<={bound}": 0 for bound in HISTOGRAM_BOUNDS_MS}
    counts[f">{HISTOGRAM_BOUNDS_MS[-1]}"] = 0
    for late in lateness_ms:
        bound = next((b for b in HISTOGRAM_BOUNDS_MS if late <= b), None)
        counts[f"<={bound}" if bound is not None else f">{HISTOGRAM_BOUNDS_MS[-1]}"] += 1
    return counts


def plot(results: dict[str, Any], path: Path) -> None:
    """The lateness distribution of the spread part (and of the burst when run) as bars
    of the share of records per lateness bucket, into a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = [part for part in ("spread", "burst") if "histogram_ms" in results.get(part, {})]
    figure, axes = plt.subplots(1, len(parts), figsize=(5.5 * len(parts), 3.6), squeeze=False)
    for axis, part in zip(axes[0], parts, strict=True):
        histogram = results[part]["histogram_ms"]
        total = max(sum(histogram.values()), 1)
        axis.bar(list(histogram), [100 * count / total for count in histogram.values()])
        axis.set_xlabel("lateness: appended to T minus due, ms")
        axis.set_ylabel("% of records")
        axis.tick_params(axis="x", labelrotation=60, labelsize=7)
        axis.set_title(f"{part}: {results[part]['records']:,} records, p50 "
                       f"{results[part]['lateness_p50_ms']:g} / p99 "
                       f"{results[part]['lateness_p99_ms']:g} ms", fontsize=9)  # fmt: skip
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _disk_bytes(directory: Path) -> int:
    """Bytes allocated on disk (a sparse file counts what it holds, not its length)."""
    return sum(path.stat().st_blocks * 512 for path in directory.rglob("*") if path.is_file())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def render(results: dict[str, Any]) -> str:
    lines = ["| part | measurement | value |", "|---|---|---|"]
    for part in ("plain", "delayed", "spread", "burst", "pending"):
        for name, value in results.get(part, {}).items():
            if isinstance(value, dict):
                continue  # the histogram: in the JSON and the plot
            shown = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"
            lines.append(f"| {part} | {name} | {shown} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
