"""The full-data view under load: apply rate, lag behind ``T``, and disk used.

    python -m benchmarks.full_view [--updates 2000000] [--keys 10000] [--record-bytes 100]
                                   [--modes process,thread] [--json PATH]

On one kshim broker (fsync on, default settings) it first produces the same keyed load to
a topic with its view off (the baseline), then to a topic ``T`` with its view on: the
produce benchmark's load (confluent-kafka, acks=all, idempotent, as fast as the client
goes), ``--updates`` records whose keys cycle over ``--keys`` keys. A sampler thread asks
for the high watermarks of ``T`` and ``T.full`` every 50 ms. Reported:

- apply rate: records of ``T`` applied per second while the load runs, and overall
  (from the first record sent until the view has applied everything);
- lag: records (``T``'s high watermark minus the view's) and milliseconds (how long ago
  ``T`` reached the position the view has now reached), p50/p99/max over the samples;
- produce throughput with the view on relative to off (the view runs off the produce
  path, but on the same two cores);
- both ways of applying the view side by side: in a child process (the default) and in
  the broker's worker threads (``kshim.full.view.process=false``);
- disk: the view's LMDB files and the source log after the load, and a check that a
  consumer reading ``T.full`` from earliest gets exactly ``--keys`` records.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.brokers import RunningBroker, running
from benchmarks.workloads import create_topic, send

RESULTS = Path(__file__).parent / "results"
SAMPLE_INTERVAL_S = 0.05
CATCH_UP_TIMEOUT_S = 600.0
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Sample:
    seconds: float  # since the load started
    source_high_watermark: int
    view_high_watermark: int


class WatermarkSampler:
    """Samples both high watermarks in a thread until stopped (ListOffsets requests)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "view-bench"})
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples: list[Sample] = []
        self.started = time.perf_counter()

    def high_watermark(self, topic: str) -> int:
        partition = TopicPartition(topic, 0)
        return int(self._consumer.get_watermark_offsets(partition, TIMEOUT_S, cached=False)[1])

    def sample(self) -> Sample:
        source = self.high_watermark(self._topic)
        view = self.high_watermark(self._topic + ".full")
        taken = Sample(time.perf_counter() - self.started, source, view)
        self.samples.append(taken)
        return taken

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            self.sample()

    def __enter__(self) -> WatermarkSampler:
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def close(self) -> None:
        self._consumer.close()


def produce_keyed(
    broker: RunningBroker, topic: str, updates: int, keys: int, record_bytes: int
) -> float:
    """Produces ``updates`` records with keys cycling over ``keys``; returns seconds taken."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 5}
    )  # fmt: skip
    key_names = [b"key-%06d" % index for index in range(keys)]
    started = time.perf_counter()
    for index in range(updates):
        send(producer, topic, (b"%d:" % index).ljust(record_bytes, b"x"), key_names[index % keys])
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("records not acknowledged")
    return time.perf_counter() - started


def wait_caught_up(sampler: WatermarkSampler, end: int) -> float:
    """Seconds since the load started at which the view had applied ``end`` records."""
    deadline = time.perf_counter() + CATCH_UP_TIMEOUT_S
    while time.perf_counter() < deadline:
        taken = sampler.sample()
        if taken.view_high_watermark >= end:
            return taken.seconds
        time.sleep(SAMPLE_INTERVAL_S / 5)
    raise TimeoutError(f"the view did not reach {end} in {CATCH_UP_TIMEOUT_S} s")


def lag_figures(samples: list[Sample], until_s: float) -> dict[str, float]:
    """Lag in records and in ms over the samples taken while the load ran."""
    during = [sample for sample in samples if sample.seconds <= until_s]
    records = sorted(s.source_high_watermark - s.view_high_watermark for s in during)
    milliseconds = sorted(_lag_ms(samples, sample) for sample in during)
    return {
        **{f"lag_records_{name}": value for name, value in _percentiles(records).items()},
        **{f"lag_ms_{name}": value for name, value in _percentiles(milliseconds).items()},
    }


def _lag_ms(samples: list[Sample], sample: Sample) -> float:
    """How long before ``sample`` the source first reached the view's position."""
    reached = next(
        (s.seconds for s in samples if s.source_high_watermark >= sample.view_high_watermark),
        sample.seconds,
    )
    return max(sample.seconds - reached, 0.0) * 1000


def _percentiles(ordered: Sequence[float]) -> dict[str, float]:
    if not ordered:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}

    def at(fraction: float) -> float:
        return float(ordered[min(int(fraction * len(ordered)), len(ordered) - 1)])

    return {"p50": at(0.5), "p99": at(0.99), "max": float(ordered[-1])}


def count_view_records(bootstrap: str, topic: str, end: int) -> int:
    """Records a consumer reads from ``T.full`` from earliest up to its high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "view-bench-read",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic + ".full", 0, 0)])
    count, position, deadline = 0, 0, time.perf_counter() + TIMEOUT_S
    while position < end and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                count += 1
        position = consumer.position([TopicPartition(topic + ".full", 0)])[0].offset
    consumer.close()
    return count


def directory_bytes(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def measure(updates: int, keys: int, record_bytes: int, mode: str) -> dict[str, Any]:
    """One broker, two topics (view off, then on); returns the figures."""
    settings = [f"kshim.full.view.process={str(mode == 'process').lower()}"]
    with running("kshim", settings) as broker:
        create_topic(broker, "baseline", full_view=False)
        baseline_s = produce_keyed(broker, "baseline", updates, keys, record_bytes)
        create_topic(broker, "changes", full_view=True)
        sampler = WatermarkSampler(broker.bootstrap, "changes")
        cpu_before = broker.cpu_seconds()
        with sampler:
            produce_s = produce_keyed(broker, "changes", updates, keys, record_bytes)
            during = [s for s in sampler.samples if s.seconds <= produce_s]
        caught_up_s = wait_caught_up(sampler, updates)
        broker_cpu_s = broker.cpu_seconds() - cpu_before
        view_records = count_view_records(broker.bootstrap, "changes", updates)
        sampler.close()
        assert broker.data_dir is not None
        data_dir = Path(broker.data_dir)
        applied_during_load = during[-1].view_high_watermark if during else 0
        return {
            "mode": mode,
            "updates": updates,
            "keys": keys,
            "record_bytes": record_bytes,
            "produce_view_off_records_per_s": updates / baseline_s,
            "produce_view_on_records_per_s": updates / produce_s,
            "produce_on_over_off": baseline_s / produce_s,
            "apply_rate_during_load_records_per_s": applied_during_load / produce_s,
            "apply_rate_records_per_s": updates / caught_up_s,
            "catch_up_after_load_s": caught_up_s - produce_s,
            "broker_cpu_s_produce_and_apply": broker_cpu_s,
            **lag_figures(sampler.samples, produce_s),
            "samples": len(during),
            "view_records_read": view_records,
            "view_disk_bytes": directory_bytes(data_dir / "full_view"),
            "source_log_bytes": directory_bytes(data_dir / "logs" / "changes-0"),
        }


ROWS: list[tuple[str, str]] = [
    ("produce, view off (rec/s)", "{produce_view_off_records_per_s:,.0f}"),
    ("produce, view on (rec/s)", "{produce_view_on_records_per_s:,.0f}"),
    ("view on / off", "{produce_on_over_off:.2f}x"),
    ("apply rate while loaded (rec/s)", "{apply_rate_during_load_records_per_s:,.0f}"),
    ("apply rate overall (rec/s)", "{apply_rate_records_per_s:,.0f}"),
    ("catch-up after the load (s)", "{catch_up_after_load_s:.2f}"),
    ("lag, records p50 / p99 / max", "{lag_records_p50:,.0f} / {lag_records_p99:,.0f} / "
     "{lag_records_max:,.0f}"),
    ("lag, ms p50 / p99 / max", "{lag_ms_p50:,.0f} / {lag_ms_p99:,.0f} / {lag_ms_max:,.0f}"),
    ("records read from T.full", "{view_records_read:,.0f}"),
    ("T.full disk (MB)", "{view_disk_mb:.1f}"),
    ("T log disk (MB)", "{source_log_mb:.1f}"),
]  # fmt: skip


def render(report: dict[str, dict[str, Any]]) -> str:
    """One column per mode (the view in a child process, or in the broker's threads)."""
    modes = list(report)
    lines = ["| metric | " + " | ".join(f"view in {mode}" for mode in modes) + " |",
             "|---|" + "---|" * len(modes)]  # fmt: skip
    for label, template in ROWS:
        cells = []
        for mode in modes:
            figures = report[mode]
            megabytes = {"view_disk_mb": figures["view_disk_bytes"] / 1e6,
                         "source_log_mb": figures["source_log_bytes"] / 1e6}  # fmt: skip
            cells.append(template.format(**figures, **megabytes))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--modes", default="process,thread", help="where the view is applied")
    parser.add_argument("--json", type=Path, default=RESULTS / "full_view.json")
    arguments = parser.parse_args()
    modes = arguments.modes.split(",")
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for _ in range(arguments.repeats):
        for mode in modes:  # interleaved, so machine noise hits both alike
            runs[mode].append(
                measure(arguments.updates, arguments.keys, arguments.record_bytes, mode)
            )
    report: dict[str, dict[str, Any]] = {}
    for mode, mode_runs in runs.items():
        numbers = [name for name, value in mode_runs[0].items() if not isinstance(value, str)]
        report[mode] = {name: statistics.median(run[name] for run in mode_runs) for name in numbers}
        report[mode]["runs"] = mode_runs
    arguments.json.parent.mkdir(parents=True, exist_ok=True)
    arguments.json.write_text(json.dumps(report, indent=2))
    print(f"{arguments.updates:,} updates to {arguments.keys:,} keys, "
          f"{arguments.record_bytes} B values, median of {arguments.repeats}")  # fmt: skip
    print(render(report))


if __name__ == "__main__":
    main()
