"""Who set each throughput run's rate: the broker, or the client beside it on the same cores.

A run whose client's busiest thread was on a core nearly all the time was paced by that
thread (benchmarks/client_threads.py), whatever the broker could have done: a ratio of two
brokers' rates measured that way compares how fast each answered one client, not how fast
each can go. The table puts each broker's cores (its whole process tree) beside the
client's busiest thread for every phase of the throughput workload, so a reader sees which
ratios the client capped, for kshim and for the Kafka it is compared with alike.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.targets import Summary

# A thread this busy had no time to wait for anyone: it set the pace (the rest is the
# scheduler's and the measurement's slack on a shared 2-core machine).
PACED = 0.9
PHASES = (
    ("produce 100 B", "produce_100B"),
    ("produce 1 KiB", "produce_1KiB"),
    ("consume 100 B", "consume_100B"),
    ("consume 1 KiB", "consume_1KiB"),
    ("consume 100 B, raw Fetch", "consume_raw_100B"),
    ("consume 1 KiB, raw Fetch", "consume_raw_1KiB"),
)


def _median(summary: Summary, metric: str, broker: str) -> float | None:
    cell = summary.get(f"throughput.{metric}", {}).get(broker)
    return None if cell is None else cell["median"]


def _broker_cores(summary: Summary, phase: str, broker: str) -> float | None:
    rate = _median(summary, f"{phase}_records_per_s", broker)
    cpu = _median(summary, f"{phase}_broker_cpu_us_per_record", broker)
    return None if rate is None or cpu is None else rate * cpu / 1e6


def _cell(summary: Summary, phase: str, broker: str) -> str:
    broker_cores = _broker_cores(summary, phase, broker)
    client = _median(summary, f"{phase}_busiest_client_thread_cores", broker)
    if client is None or math.isnan(client):  # not measured (an older result: absent)
        return "-"
    shown = "-" if broker_cores is None else f"{broker_cores:.2f}"
    paced = " (client)" if client >= PACED else ""
    return f"{shown} / {client:.2f}{paced}"


def paced_lines(results: dict[str, Any], summary: Summary) -> list[str]:
    """The report's section: a row per throughput phase, a column per broker; empty for a
    result with no throughput figures."""
    brokers = [b for b in results["brokers"] if any(_cell(summary, p, b) != "-" for _, p in PHASES)]
    if not brokers:
        return []
    lines = [
        "## Who set the rate",
        "",
        "Each throughput phase's broker cores (its whole process tree) / the client's busiest "
        f'thread, as shares of one core, medians; "(client)" where that thread was at '
        f"{PACED:g} or more, so the client set the rate whatever the broker could do "
        "(benchmarks/who_paced.py).",
        "",
        "| phase | " + " | ".join(brokers) + " |",
        "|---|" + "---|" * len(brokers),
    ]
    for label, phase in PHASES:
        lines.append(f"| {label} | " + " | ".join(_cell(summary, phase, b) for b in brokers) + " |")
    return [*lines, ""]
