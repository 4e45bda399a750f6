"""PNG plots of a benchmarks.run result (matplotlib, Agg backend: no display needed).

Bars are medians; error bars span the min-max spread of the repeats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

COLOURS = {"kshim": "#1f77b4", "tansu": "#ff7f0e", "kafka": "#2ca02c", "kafka-fsync": "#006400",
           "kafka4": "#9acd32", "kshim-baseline": "#7f7f7f"}  # fmt: skip


def _bars(
    axes: Axes, results: dict[str, Any], metrics: list[tuple[str, str]], scale: float
) -> None:
    """Grouped bars: one group per metric, one bar per broker, with min-max error bars."""
    brokers = results["brokers"]
    width = 0.8 / max(len(brokers), 1)
    for index, broker in enumerate(brokers):
        medians, low, high = [], [], []
        for metric, _ in metrics:
            cell = results["summary"].get(metric, {}).get(broker)
            median = cell["median"] / scale if cell else 0.0
            medians.append(median)
            low.append(median - cell["min"] / scale if cell else 0.0)
            high.append(cell["max"] / scale - median if cell else 0.0)
        positions = [group + index * width for group in range(len(metrics))]
        axes.bar(positions, medians, width, yerr=[low, high], capsize=3, label=broker,
                 color=COLOURS.get(broker))  # fmt: skip
    axes.set_xticks([group + width * (len(brokers) - 1) / 2 for group in range(len(metrics))])
    axes.set_xticklabels([label for _, label in metrics], fontsize=8)
    axes.legend(fontsize=8)


def draw(results: dict[str, Any], directory: Path) -> list[str]:
    """Writes the plots into ``directory``; returns their file names."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    _bars(left, results, [("throughput.produce_100B_records_per_s", "produce\n100 B"),
                          ("throughput.produce_1KiB_records_per_s", "produce\n1 KiB"),
                          ("throughput.consume_100B_records_per_s", "consume\n100 B"),
                          ("throughput.consume_1KiB_records_per_s", "consume\n1 KiB"),
                          ("transactional.records_per_s", "txn produce\n100 B")], 1000)  # fmt: skip
    left.set_ylabel("thousand records/s")
    left.set_title("Throughput, 1 partition, acks=all")
    _bars(right, results, [("latency.p50_ms", "p50"), ("latency.p99_ms", "p99"),
                           ("latency.p999_ms", "p99.9"), ("transactional.commit_p50_ms",
                           "txn commit\np50"), ("transactional.commit_p99_ms",
                           "txn commit\np99")], 1)  # fmt: skip
    right.set_yscale("log")
    right.set_ylabel("ms (log scale)")
    right.set_title("End-to-end latency at 1,000 records/s; transaction commits")
    figure.tight_layout()
    figure.savefig(directory / "throughput_latency.png", dpi=100)
    plt.close(figure)

    backlog = results["scale"]["backlog_records"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    _bars(left, results, [("venus.kafka-python_seconds", "kafka-python"),
                          ("venus.confluent-kafka_seconds", "confluent-kafka")], 1)  # fmt: skip
    left.set_ylabel("seconds, first send to last receive")
    left.set_title(f"VENUS transmission: {results['scale']['venus_records']:,} JSON row changes")
    _bars(right, results, [("accumulation.idle_rss_mb", "idle"),
                           ("accumulation.backlog_rss_mb", f"{backlog:,} backlog"),
                           ("idle_connections.extra_rss_mb", "+500 idle conns")], 1)  # fmt: skip
    right.set_ylabel("MB RSS (idle connections: extra)")
    right.set_title("Broker memory")
    figure.tight_layout()
    figure.savefig(directory / "venus_memory.png", dpi=100)
    plt.close(figure)
    return ["throughput_latency.png", "venus_memory.png"]
