"""Summaries, the scale issue's targets, and the markdown tables of a benchmarks.scale run.

Each measurement's median and spread (min-max) over repeats, per broker and topic count.
A measurement a broker failed shows as "failed" (the reason is listed under the tables),
one that does not apply to it as "n/a". The targets are the issue's, checked on kshim's
medians at the largest topic count run (10,000 in a full run).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Summary = dict[str, dict[str, dict[str, dict[str, float]]]]  # broker -> N -> metric -> stats


@dataclass(frozen=True)
class Measure:
    key: str
    label: str
    phase: str  # the phase whose failure leaves this measure empty


SECTIONS: dict[str, list[Measure]] = {
    "Topics and Metadata": [
        Measure("create_s", "create N topics, s", "create"),
        Measure("fresh_start_s", "fresh start to first answer, s", "start"),
        Measure("restart_graceful_s", "restart with N topics (after SIGTERM) to first answer, s",
                "restart_graceful"),
        Measure("served_after_create_s", "then until every topic has a leader, s", "create"),
        Measure("served_after_restart_s", "after the restart, until every topic has a leader, s",
                "produce"),
        Measure("fds_after_create", "open fds after creating, whole tree", "create"),
        Measure("rss_after_create_mb", "RSS after creating, whole tree, MB", "create"),
        Measure("metadata_all_topics_ms", "Metadata, all topics, ms", "metadata"),
        Measure("metadata_named_ms", "Metadata naming all N topics, ms", "metadata"),
        Measure("metadata_topics_listed", "topics in the all-topics answer", "metadata"),
    ],
    "Produce (confluent-kafka, round-robin over all N topics)": [
        Measure("produce_records_per_s", "records/s acknowledged", "produce"),
        Measure("produce_broker_cpu_us_per_record", "broker CPU µs per record, whole tree",
                "produce"),
        Measure("produce_broker_cores", "broker CPU, cores, whole tree", "produce"),
        Measure("produce_client_cores", "client CPU, cores", "produce"),
        Measure("produce_busiest_client_thread_cores", "busiest client thread, cores", "produce"),
        Measure("fsyncs_per_s", "fsyncs/s", "fsyncs"),
        Measure("fsyncs_per_1000_records", "fsyncs per 1,000 records", "fsyncs"),
        Measure("produce_peak_fds", "open fds, peak, whole tree", "produce"),
        Measure("produce_end_fds", "open fds at the end, whole tree", "produce"),
        Measure("produce_peak_rss_mb", "RSS peak, whole tree, MB", "produce"),
    ],
    "Group commit (raw acks=all Produce requests touching min(N, 1,000) partitions)": [
        Measure("wide_produce_partitions", "partitions per request", "wide_produce"),
        Measure("wide_produce_ms", "ms per request", "wide_produce"),
        Measure("wide_fsyncs_per_request", "fsyncs per request", "wide_fsyncs"),
    ],
    "Records written and read back": [
        Measure("written", "written", "produce"),
        Measure("acknowledged", "acknowledged", "produce"),
        Measure("delivery_failures", "delivery failures", "produce"),
        Measure("read_back", "acknowledged and read back intact", "read_back"),
        Measure("lost", "acknowledged but missing or different", "read_back"),
        Measure("read_back_s", "read back, s", "read_back"),
        Measure("after_kill_read_back", "read back intact after kill -9 and restart",
                "read_back_after_kill"),
        Measure("after_kill_lost", "lost after kill -9 and restart", "read_back_after_kill"),
    ],
    "End-to-end latency (1,000 records/s over all N topics, default client settings)": [
        Measure("latency_p50_ms", "p50, ms", "latency"),
        Measure("latency_p99_ms", "p99, ms", "latency"),
        Measure("latency_received", "records received in time (of rate x seconds sent)",
                "latency"),
    ],
    "Start-up after kill -9 of the whole tree (same data)": [
        Measure("restart_after_kill_s", "to first answered ApiVersions, s", "kill9"),
        Measure("first_produce_after_kill_s", "to first acknowledged produce, s",
                "first_produce_after_kill"),
    ],
    "Whole cell (produce, group commit, read back, latency, restart)": [
        Measure("peak_rss_mb", "RSS peak, whole tree, MB", "produce"),
        Measure("peak_fds", "open fds peak, whole tree", "produce"),
        Measure("read_back_peak_fds", "open fds peak while reading back", "read_back"),
        Measure("latency_peak_fds", "open fds peak in the latency phase", "latency"),
        Measure("after_kill_read_back_peak_rss_mb", "RSS peak reading back after kill -9, MB",
                "read_back_after_kill"),
    ],
}  # fmt: skip


@dataclass(frozen=True)
class Target:
    label: str
    wanted: str
    value: Callable[[Summary, str, int], float | None]  # (summary, broker, N)
    met: Callable[[float], bool]


def _stat(summary: Summary, broker: str, count: int, metric: str, stat: str) -> float | None:
    stats = summary.get(broker, {}).get(str(count), {}).get(metric)
    return None if stats is None else stats[stat]


def _produce_ratio(summary: Summary, broker: str, count: int) -> float | None:
    """The broker's produce rate at ``count`` topics over its own rate at 100."""
    at_count = _stat(summary, broker, count, "produce_records_per_s", "median")
    at_100 = _stat(summary, broker, 100, "produce_records_per_s", "median")
    return at_count / at_100 if at_count is not None and at_100 else None


def _lost_anywhere(summary: Summary, broker: str, count: int) -> float | None:
    """The most records lost in any repeat, before or after the kill -9."""
    before = _stat(summary, broker, count, "lost", "max")
    after = _stat(summary, broker, count, "after_kill_lost", "max")
    return None if before is None or after is None else max(before, after)


def _median_of(metric: str) -> Callable[[Summary, str, int], float | None]:
    return lambda summary, broker, count: _stat(summary, broker, count, metric, "median")


TARGETS = [
    Target("produce spread over all topics, vs the broker's own rate at 100 topics",
           ">= 0.8x", _produce_ratio, lambda ratio: ratio >= 0.8),
    Target("acknowledged records lost (worst repeat, incl. after kill -9)", "0",
           _lost_anywhere, lambda lost: lost == 0),
    Target("open fds, peak, whole tree", "<= 256", _median_of("peak_fds"),
           lambda fds: fds <= 256),
    Target("RSS, peak, whole tree, MB", "<= 150", _median_of("peak_rss_mb"),
           lambda mb: mb <= 150),
    Target("first answer after kill -9, s", "< 2", _median_of("restart_after_kill_s"),
           lambda seconds: seconds < 2),
    Target("Metadata, all topics, ms", "< 100", _median_of("metadata_all_topics_ms"),
           lambda ms: ms < 100),
    Target("Metadata naming all topics, ms", "< 100", _median_of("metadata_named_ms"),
           lambda ms: ms < 100),
    # "about one fsync round, not 1,000": read here as fewer than 10 per request.
    Target("fsyncs per Produce request touching 1,000 partitions", "< 10 (one round)",
           _median_of("wide_fsyncs_per_request"), lambda fsyncs: fsyncs < 10),
]  # fmt: skip


def summarise(samples: dict[str, dict[str, list[dict[str, Any]]]]) -> Summary:
    """Median, min, max and count of each metric per broker and N, over the repeats that
    measured it."""
    summary: Summary = {}
    for broker, by_count in samples.items():
        for count, cells in by_count.items():
            values: dict[str, list[float]] = {}
            for cell in cells:
                for metric, value in cell["metrics"].items():
                    values.setdefault(metric, []).append(value)
            summary.setdefault(broker, {})[count] = {
                metric: {"median": statistics.median(series), "min": min(series),
                         "max": max(series), "n": len(series)}
                for metric, series in values.items()
            }  # fmt: skip
    return summary


def check_targets(summary: Summary, counts: list[int]) -> list[dict[str, Any]]:
    """Each target at the largest N run: every broker's value, and whether kshim's met it
    (the others' are context)."""
    count = max(counts)
    checked = []
    for target in TARGETS:
        values = {broker: target.value(summary, broker, count) for broker in summary}
        kshim = values.get("kshim")
        checked.append({"target": target.label, "topics": count, "values": values,
                        "wanted": target.wanted,
                        "met": None if kshim is None else target.met(kshim)})  # fmt: skip
    return checked


def _number(value: float) -> str:
    if abs(value) >= 1000 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def _cell(stats: dict[str, float] | None, reasons: set[str]) -> str:
    if stats is None:
        return "failed" if "failed" in reasons else "n/a" if reasons else "-"
    shown = _number(stats["median"])
    low, high = _number(stats["min"]), _number(stats["max"])
    return shown if low == high else f"{shown} ({low}-{high})"


def _phase_states(cells: list[dict[str, Any]], phase: str) -> set[str]:
    states = set()
    for cell in cells:
        if phase in cell["failed"]:
            states.add("failed")
        if phase in cell["not_measured"]:
            states.add("n/a")
    return states


def section_table(results: dict[str, Any], measures: list[Measure]) -> list[str]:
    counts = results["plan"]["topic_counts"]
    header = " | ".join(topics_label(count) for count in counts)
    lines = [f"| measurement | broker | {header} |", "|---|---|" + "---|" * len(counts)]
    for measure in measures:
        for broker in results["brokers"]:
            shown = []
            for count in counts:
                cells = results["samples"][broker][str(count)]
                stats = results["summary"].get(broker, {}).get(str(count), {}).get(measure.key)
                shown.append(_cell(stats, _phase_states(cells, measure.phase)))
            lines.append(f"| {measure.label} | {broker} | {' | '.join(shown)} |")
    return lines


def target_table(results: dict[str, Any]) -> list[str]:
    brokers = results["brokers"]
    lines = [f"| target | topics | {' | '.join(brokers)} | wanted | kshim result |",
             "|---|---|" + "---|" * len(brokers) + "---|---|"]  # fmt: skip
    for row in results["targets"]:
        values = [row["values"].get(broker) for broker in brokers]
        shown = " | ".join("-" if value is None else _number(value) for value in values)
        verdict = {True: "met", False: "**missed**", None: "not measured"}[row["met"]]
        lines.append(f"| {row['target']} | {row['topics']:,} | {shown} | {row['wanted']} | "
                     f"{verdict} |")  # fmt: skip
    return lines


def topics_label(count: int) -> str:
    return f"{count:,} topic{'' if count == 1 else 's'}"


def problems(results: dict[str, Any]) -> list[str]:
    """One line per broker, phase and reason, with the topic counts and repeats it
    happened at."""
    seen: dict[tuple[str, str, str], tuple[set[int], set[int]]] = {}
    for broker, by_count in results["samples"].items():
        for count, cells in by_count.items():
            for repeat, cell in enumerate(cells, 1):
                for kind, verb in (("failed", "failed"), ("not_measured", "not measured")):
                    for phase, reason in cell[kind].items():
                        counts, repeats = seen.setdefault((broker, f"{phase} {verb}", reason),
                                                          (set(), set()))  # fmt: skip
                        counts.add(int(count))
                        repeats.add(repeat)
    return [
        f"- {broker}, {what} at {', '.join(topics_label(n) for n in sorted(counts))} "
        f"(repeat {', '.join(map(str, sorted(repeats)))}): {reason}"
        for (broker, what, reason), (counts, repeats) in seen.items()
    ]


def logged(results: dict[str, Any]) -> list[str]:
    """The failure lines each broker's stderr held, per topic count and repeat."""
    lines = []
    for broker, by_count in results["samples"].items():
        for count, cells in by_count.items():
            for repeat, cell in enumerate(cells, 1):
                for line in cell.get("broker_log", []):
                    lines.append(f"- {broker}, {topics_label(int(count))}, repeat {repeat}: "
                                 f"`{line}`")  # fmt: skip
    return lines


def render(results: dict[str, Any]) -> str:
    plan = results["plan"]
    lines = [
        "# Many topics on one node: kshim side by side",
        "",
        f"Run started {results['generated_utc']}: `{results['command']}`, "
        f"{results['elapsed_s'] / 60:.1f} minutes; {results['machine']}.",
        f"Brokers: {', '.join(results['brokers'])}, alternating within each of "
        f"{plan['repeats']} repeats; medians, spread (min-max) where repeats differ. "
        f"{plan['records']:,} records of 100 B per produce phase; latency at "
        f"{plan['latency_rate']:,} records/s for {plan['latency_s']:g} s.",
        f"Producer (every broker and N): `{results['producer_config']}`.",
    ]
    lines += [f"Skipped: {name}: {reason}." for name, reason in results["skipped"].items()]
    lines += [f"Note: {note}" for note in results["notes"]]
    lines += ["", "## Targets", "", *target_table(results)]
    for title, measures in SECTIONS.items():
        lines += ["", f"## {title}", "", *section_table(results, measures)]
    found = problems(results)
    if found:
        lines += ["", "## Failed or not measured", "", *found]
    in_logs = logged(results)
    if in_logs:
        lines += ["", "## Failure lines in the brokers' standard error", "", *in_logs]
    return "\n".join(lines) + "\n"
