"""kshim's targets in the side-by-side run, each stated as a ratio to an Apache Kafka column.

A target compares kshim's median with the median of one Kafka column measured in the same
run (benchmarks/kafka_columns.py). Produce rates and their CPU, latency, reading, memory and
start-up are measured against ``kafka``, Kafka at its defaults (it acknowledges before any
fsync, kshim after one): what a user moving from Kafka compares. The VENUS transmission and
transactions are measured against ``kafka-fsync`` (every batch fsynced before its
acknowledgement), the Kafka that promises what kshim does.
Some targets also keep a fixed bound (a latency in ms, an RSS in MB). Tansu's median and
kshim's ratio to it are shown beside every target, with no bound: it keeps its log in
memory, so it measures a broker with no disk in the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Summary = dict[str, dict[str, dict[str, float]]]  # metric -> broker -> median/min/max/n
KSHIM, TANSU, KAFKA, KAFKA_FSYNC = "kshim", "tansu", "kafka", "kafka-fsync"
HIGHER, LOWER = "higher", "lower"


@dataclass(frozen=True)
class Target:
    """kshim's median of ``metric`` against column ``reference``'s: ``better`` says which way
    is better; ``ratio`` bounds kshim / reference, ``limit`` kshim's own value (either may
    be None). ``compared`` is False where the quotient means nothing (a fraction near 0).
    Targets sharing a ``headline`` share one row of the README's table."""

    label: str
    metric: str  # "workload.metric"
    better: str
    reference: str
    ratio: float | None = None
    limit: float | None = None
    unit: str = ""
    headline: str = ""
    compared: bool = True

    def wanted(self) -> str:
        parts = []
        if self.ratio is not None:
            parts.append(
                f"{'>=' if self.better == HIGHER else '<='} {self.ratio:g}x {self.reference}"
            )
        if self.limit is not None:
            sign = ">" if self.better == HIGHER else "<"
            parts.append(f"{sign} {self.limit:g} {self.unit}".strip())
        return " and ".join(parts)

    def verdict(self, kshim: float | None, reference: float | None) -> bool | None:
        """True when every bound is met, False when one is missed, None when a bound
        could not be checked (a broker not measured) and none was missed."""
        checks = []
        quotient = ratio(kshim, reference)
        if self.ratio is not None:
            checks.append(None if quotient is None else self._beats(quotient, self.ratio))
        if self.limit is not None:
            checks.append(None if kshim is None else self._beats(kshim, self.limit))
        if False in checks:
            return False
        return None if None in checks else True

    def _beats(self, value: float, bound: float) -> bool:
        return value >= bound if self.better == HIGHER else value <= bound


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator for two positive values; None otherwise (a negative or zero
    quotient of, say, two throughput drops would read as a comparison it is not)."""
    if numerator is None or denominator is None or numerator <= 0 or denominator <= 0:
        return None
    return numerator / denominator


PRODUCE = "produce 100 B / 1 KiB, records/s"
PRODUCE_CPU = "broker CPU µs per record, produce 100 B / 1 KiB"
CONSUME = "consume 100 B / 1 KiB (raw Fetch), records/s"
LATENCY = "e2e latency p50 / p99 at 1,000 rec/s, ms"
LATENCY_FETCH_10 = "same, fetch.wait.max.ms=10: p50 / p99, ms"
ACKNOWLEDGEMENT = "produce acknowledgement p50 / p99 at 1,000 rec/s, ms"
VENUS = "VENUS row changes, kafka-python / confluent-kafka, s"
COMMIT = "transaction commit p50 / p99, ms"
IDLE_RSS = "idle RSS / after a produce, MB"
IDLE_CONNECTIONS = "500 idle connections: extra RSS MB / produce records/s"
TARGETS = [
    Target("produce 100 B, records/s", "throughput.produce_100B_records_per_s", HIGHER,
           KAFKA, 1.3, headline=PRODUCE),
    Target("produce 1 KiB, records/s", "throughput.produce_1KiB_records_per_s", HIGHER,
           KAFKA, 1.3, headline=PRODUCE),
    Target("broker CPU µs per record, produce 100 B",
           "throughput.produce_100B_broker_cpu_us_per_record", LOWER, KAFKA, 0.3,
           headline=PRODUCE_CPU),
    Target("broker CPU µs per record, produce 1 KiB",
           "throughput.produce_1KiB_broker_cpu_us_per_record", LOWER, KAFKA, 0.3,
           headline=PRODUCE_CPU),
    # Read with raw Fetch requests (benchmarks.workloads.consume_raw): with confluent-kafka
    # the client sets the rate, the same on every broker (librdkafka pauses fetching while
    # its queue holds queued.min.messages records; Python's work per record otherwise).
    Target("consume 100 B, records/s", "throughput.consume_raw_100B_records_per_s", HIGHER,
           KAFKA, 2.0, headline=CONSUME),
    Target("consume 1 KiB, records/s", "throughput.consume_raw_1KiB_records_per_s", HIGHER,
           KAFKA, 3.0, headline=CONSUME),
    Target("e2e latency p50 at 1,000 rec/s, ms", "latency.p50_ms", LOWER, KAFKA, 1.0,
           headline=LATENCY),
    Target("e2e latency p99 at 1,000 rec/s, ms", "latency.p99_ms", LOWER, KAFKA, 1.0,
           10.0, "ms", LATENCY),
    Target("e2e latency p50, fetch.wait.max.ms=10, ms", "latency.fetch_wait_10ms_p50_ms",
           LOWER, KAFKA, 1.0, headline=LATENCY_FETCH_10),
    Target("e2e latency p99, fetch.wait.max.ms=10, ms", "latency.fetch_wait_10ms_p99_ms",
           LOWER, KAFKA, 1.0, 10.0, "ms", LATENCY_FETCH_10),
    Target("produce acknowledgement p50, ms", "latency.ack_p50_ms", LOWER, KAFKA, None,
           headline=ACKNOWLEDGEMENT),
    Target("produce acknowledgement p99, ms", "latency.ack_p99_ms", LOWER, KAFKA, None, 10.0,
           "ms", ACKNOWLEDGEMENT),
    Target("VENUS row changes, kafka-python, s", "venus.kafka-python_seconds", LOWER,
           KAFKA_FSYNC, 1.0, headline=VENUS),
    Target("VENUS row changes, confluent-kafka, s", "venus.confluent-kafka_seconds", LOWER,
           KAFKA_FSYNC, 1.0, headline=VENUS),
    Target("transactions of 1,000 records, records/s", "transactional.records_per_s", HIGHER,
           KAFKA_FSYNC, 0.9, headline="transactions of 1,000 records, records/s"),
    Target("transaction commit p50, ms", "transactional.commit_p50_ms", LOWER, KAFKA_FSYNC, 1.0,
           headline=COMMIT),
    Target("transaction commit p99, ms", "transactional.commit_p99_ms", LOWER, KAFKA_FSYNC, 1.0,
           headline=COMMIT),
    Target("idle RSS, MB", "accumulation.idle_rss_mb", LOWER, KAFKA, 0.25, 40.0, "MB",
           IDLE_RSS),
    Target("idle RSS after a produce, MB", "accumulation.idle_rss_after_produce_mb", LOWER,
           KAFKA, 0.25, 40.0, "MB", IDLE_RSS),
    Target("RSS growth per backlogged record, B",
           "accumulation.rss_bytes_per_backlogged_record", LOWER, KAFKA, None, 10.0, "B",
           "RSS growth per backlogged record, B"),
    Target("ready to serve after start, s", "accumulation.ready_s", LOWER, KAFKA, 0.5, 0.5,
           "s", "ready to serve after start, s"),
    Target("500 idle connections: extra RSS, MB", "idle_connections.extra_rss_mb", LOWER,
           KAFKA, 1.0, 50.0, "MB", IDLE_CONNECTIONS),
    Target("500 idle connections: produce records/s", "idle_connections.records_per_s_with",
           HIGHER, KAFKA_FSYNC, 0.9, headline=IDLE_CONNECTIONS),
    Target("500 idle connections: produce throughput drop (fraction)",
           "idle_connections.throughput_drop", LOWER, KAFKA_FSYNC, None, 0.10, compared=False),
]  # fmt: skip


def median(summary: Summary, metric: str, broker: str) -> float | None:
    return summary.get(metric, {}).get(broker, {}).get("median")


def check_targets(summary: Summary) -> list[dict[str, Any]]:
    """Every target with kshim's, its Kafka column's and Tansu's medians, the two ratios and
    whether it is met (True, False, or None when not measured)."""
    checked = []
    for target in TARGETS:
        kshim = median(summary, target.metric, KSHIM)
        reference = median(summary, target.metric, target.reference)
        tansu = median(summary, target.metric, TANSU)
        compared = target.compared
        checked.append({
            "label": target.label, "metric": target.metric, "headline": target.headline,
            "reference": target.reference, "kshim": kshim, "reference_value": reference,
            "ratio": ratio(kshim, reference) if compared else None, "tansu": tansu,
            "tansu_ratio": ratio(kshim, tansu) if compared else None,
            "target": target.wanted(), "met": target.verdict(kshim, reference),
        })  # fmt: skip
    return checked
