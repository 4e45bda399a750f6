"""Log store benchmark: kshim next to Tansu, measured in the same run.

    python -m benchmarks.log_store            # full run, ~5 minutes
    python -m benchmarks.log_store --quick    # smaller counts, for a smoke check
    python -m benchmarks.log_store --baseline DIR   # also kshim from the checkout DIR,
                                                    # into log_store_baseline.{json,md}

Prints markdown tables and writes benchmarks/results/log_store.json (and .md).
Workloads: produce and consume throughput (1 partition, acks=all, idempotent,
100 B and 1 KiB records, confluent-kafka) with the broker's CPU per record;
end-to-end latency at 1,000 records/s with default client settings; kshim's
RSS after a 200,000 and a 2,000,000-record backlog; recovery time of a 1 GiB
log after kill -9; time to first answer on a fresh data dir; the disk's
fsync rate for context.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.brokers import BASELINE, running
from benchmarks.ceilings import fsync_rate
from benchmarks.startup import time_to_first_answer
from benchmarks.workloads import Throughput, consume, create_topic, end_to_end_latency, produce
from compat_tests.brokers import tansu_binary

RESULTS = Path(__file__).parent / "results"


def throughput_runs(
    brokers: list[str], record_bytes: int, count: int, repeats: int
) -> dict[str, dict[str, Any]]:
    """Runs the brokers alternately, repeat by repeat, so background noise hits both alike."""
    runs: dict[str, list[dict[str, Throughput]]] = {name: [] for name in brokers}
    for _ in range(repeats):
        for name in brokers:
            with running(name) as broker:
                create_topic(broker, "bench")
                produced = produce(broker, "bench", count, record_bytes, **{"linger.ms": 5})
                consumed = consume(broker, "bench", count, record_bytes)
                runs[name].append({"produce": produced, "consume": consumed})
    return {f"{name}/{record_bytes}B": _phases(runs[name]) for name in brokers}


def _phases(runs: list[dict[str, Throughput]]) -> dict[str, Any]:
    return {
        phase: _summary([run[phase].records_per_second for run in runs],
                        [run[phase].megabytes_per_second for run in runs],
                        [run[phase].broker_cpu_microseconds_per_record for run in runs])
        for phase in ("produce", "consume")
    }  # fmt: skip


def _summary(rates: list[float], megabytes: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "records_per_s": statistics.median(rates),
        "records_per_s_spread": max(rates) - min(rates),
        "mb_per_s": statistics.median(megabytes),
        "broker_cpu_us_per_record": statistics.median(cpu),
    }


def backlog_rss(counts: list[int]) -> dict[str, float]:
    """kshim's RSS after each cumulative backlog of 100-byte records (no consumer)."""
    result = {}
    with running("kshim") as broker:
        create_topic(broker, "backlog")
        produced = 0
        for count in counts:
            produce(broker, "backlog", count - produced, 100, **{"linger.ms": 5})
            produced = count
            time.sleep(1)
            result[str(count)] = broker.rss_bytes() / 1e6
        result["disk_mb"] = broker.disk_bytes() / 1e6
    return result


def recovery_time(log_bytes: int) -> dict[str, float]:
    """Builds a log of ``log_bytes`` in 1 KiB records, kill -9s the broker, times the restart."""
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as data_dir:
        with running("kshim", data_dir=data_dir) as broker:
            create_topic(broker, "big")
            produce(broker, "big", log_bytes // 1024, 1024, **{"linger.ms": 5})
            assert broker.process is not None  # a kshim child process
            broker.process.kill()
            broker.process.wait()
        seconds, process = time_to_first_answer(data_dir)
        process.terminate()
        process.wait(30)
        on_disk = sum(p.stat().st_size for p in Path(data_dir).rglob("*.log"))
    return {"log_mb": on_disk / 1e6, "restart_to_first_answer_s": seconds}


def fresh_start_time() -> float:
    with tempfile.TemporaryDirectory(prefix="bench-start-") as data_dir:
        seconds, process = time_to_first_answer(os.path.join(data_dir, "data"))
        process.terminate()
        process.wait(30)
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--baseline", metavar="DIR", help="also run kshim from this checkout (an earlier commit)"
    )
    arguments = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    scale = 10 if arguments.quick else 1
    brokers = ["kshim"] + (["tansu"] if tansu_binary() else [])
    if arguments.baseline:
        os.environ["KSHIM_BASELINE_DIR"] = arguments.baseline
        brokers.insert(1, BASELINE)
    machine = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "fsyncs_per_s": fsync_rate(),
    }
    report: dict[str, Any] = {"machine": machine}
    report["throughput"] = {}
    for size, count in ((100, 500_000), (1024, 200_000)):
        report["throughput"].update(
            throughput_runs(brokers, size, count // scale, arguments.repeats)
        )
    report["latency_1000_per_s"] = {}
    for name in brokers:
        with running(name) as broker:
            create_topic(broker, "latency")
            report["latency_1000_per_s"][name] = end_to_end_latency(
                broker, "latency", 1000, 10 / scale
            )
    report["kshim_rss_mb"] = backlog_rss([200_000 // scale, 2_000_000 // scale])
    report["kshim_recovery"] = recovery_time((1 << 30) // scale)
    report["kshim_fresh_start_to_first_answer_s"] = fresh_start_time()
    # An A/B against a baseline checkout is its own record, beside the usual one.
    stem = "log_store_baseline" if arguments.baseline else "log_store"
    (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=2))
    markdown = render(report, brokers)
    (RESULTS / f"{stem}.md").write_text(markdown)
    print(markdown)


def render(report: dict[str, Any], brokers: list[str]) -> str:
    lines = [
        "| workload | "
        + " | ".join(brokers)
        + f" | kshim / {brokers[1] if len(brokers) > 1 else '-'} |",
        "|---" * (len(brokers) + 2) + "|",
    ]
    for size in (100, 1024):
        for phase in ("produce", "consume"):
            for metric, unit in (("records_per_s", "rec/s"), ("mb_per_s", "MB/s"),
                                 ("broker_cpu_us_per_record", "broker µs/rec")):  # fmt: skip
                values = [
                    report["throughput"][f"{name}/{size}B"][phase][metric] for name in brokers
                ]
                ratio = f"{values[0] / values[1]:.2f}x" if len(values) > 1 and values[1] else "-"
                cells = " | ".join(f"{value:,.2f}" for value in values)
                lines.append(f"| {phase} {size} B, {unit} | {cells} | {ratio} |")
    for name, latency in report["latency_1000_per_s"].items():
        percentiles = ", ".join(
            f"{label} {latency[key]:.2f} ms"
            for label, key in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms"))
        )
        lines.append(f"\nlatency at 1,000 rec/s, {name}: {percentiles}")
    lines.append(f"\nkshim RSS (MB) after backlog: {report['kshim_rss_mb']}")
    lines.append(f"kshim recovery after kill -9: {report['kshim_recovery']}")
    lines.append(
        f"kshim fresh start to first answer: {report['kshim_fresh_start_to_first_answer_s']:.3f} s"
    )
    lines.append(f"disk fsyncs/s: {report['machine']['fsyncs_per_s']:.0f}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
