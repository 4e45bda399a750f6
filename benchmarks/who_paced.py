"""Who set each throughput run's rate: the broker, or the client beside it on the same cores.

A run whose client's busiest thread was on a core nearly all the time was paced by that
thread (benchmarks/client_threads.py), whatever the broker could have done: a ratio of two
brokers' rates measured that way compares how fast each answered one client, not how fast
each can go. Nor does one where the broker and the client together kept every core of the
machine busy: a broker that used less CPU left it to the client, and the two shared what
the machine had. The table puts each broker's cores (its whole process tree) beside the
client's busiest thread and the client's whole process for every phase of the throughput
workload, so a reader sees which ratios the client or the machine capped, for kshim and for
the Kafka it is compared with alike.
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


def _cell(summary: Summary, phase: str, broker: str, cores: int | None) -> str:
    broker_cores = _broker_cores(summary, phase, broker)
    busiest = _median(summary, f"{phase}_busiest_client_thread_cores", broker)
    if busiest is None or math.isnan(busiest):  # not measured (an older result: absent)
        return "-"
    client = _median(summary, f"{phase}_client_cores", broker)  # absent before it was kept
    shown = [
        "-" if broker_cores is None else f"{broker_cores:.2f}",
        f"{busiest:.2f}",
        *([] if client is None or math.isnan(client) else [f"{client:.2f}"]),
    ]
    paced = ""
    if busiest >= PACED:
        paced = " (client)"
    elif _filled(broker_cores, client, cores):
        paced = " (machine)"
    return " / ".join(shown) + paced


def _filled(broker_cores: float | None, client: float | None, cores: int | None) -> bool:
    """Whether the broker and the client together kept (nearly) every core busy."""
    if broker_cores is None or client is None or math.isnan(client) or not cores:
        return False
    return broker_cores + client >= PACED * cores


def paced_lines(results: dict[str, Any], summary: Summary) -> list[str]:
    """The report's section: a row per throughput phase, a column per broker; empty for a
    result with no throughput figures."""
    cores = results.get("machine", {}).get("cores")
    brokers = [
        broker
        for broker in results["brokers"]
        if any(_cell(summary, phase, broker, cores) != "-" for _, phase in PHASES)
    ]
    if not brokers:
        return []
    lines = [
        "## Who set the rate",
        "",
        "Each throughput phase's broker cores (its whole process tree) / the client's busiest "
        'thread / the client\'s whole process, as shares of one core, medians; "(client)" '
        f"where that thread was at {PACED:g} or more, so the client set the rate whatever the "
        f'broker could do; "(machine)" where broker and client together used {PACED:g} of '
        f"the machine's {cores or '?'} cores or more, so they shared what it had "
        "(benchmarks/who_paced.py).",
        "",
        "| phase | " + " | ".join(brokers) + " |",
        "|---|" + "---|" * len(brokers),
    ]
    for label, phase in PHASES:
        row = " | ".join(_cell(summary, phase, broker, cores) for broker in brokers)
        lines.append(f"| {label} | {row} |")
    return [*lines, ""]
