"""benchmarks.security_kafka's verdicts and tables, from made-up runs (the benchmark itself
runs by hand: it needs minutes and Kafka)."""

from __future__ import annotations

from typing import Any

from benchmarks.security import compare_runs
from benchmarks.security_kafka import render, targets


def run(records_per_s: float, broker_cores: float = 0.5, busiest: float = 0.9) -> dict[str, float]:
    return {
        "records": 1000.0,
        "records_per_s": records_per_s,
        "broker_cpu_us_per_record": 1.0,
        "first_record_ms": 5.0,
        "broker_cores": broker_cores,
        "client_cores": 1.2,
        "busiest_client_thread_cores": busiest,
    }


def throughput(plain: float, secure: float) -> dict[str, Any]:
    shapes = ("produce 1 KiB", "consume 1 KiB")
    runs = {
        shape: {"PLAINTEXT": [run(plain)] * 3, "SASL_SSL": [run(secure)] * 3} for shape in shapes
    }
    return compare_runs(runs)


def test_kshim_meets_the_target_only_at_0_8_and_at_least_kafkas_ratio() -> None:
    found = targets({"kshim": throughput(100, 85), "kafka": throughput(100, 50)})
    assert found["consume 1 KiB"] == {"kshim_ratio": 0.85, "kafka_ratio": 0.5, "met": True}
    assert not targets({"kshim": throughput(100, 70), "kafka": throughput(100, 50)})[
        "produce 1 KiB"
    ]["met"]
    assert not targets({"kshim": throughput(100, 85), "kafka": throughput(100, 90)})[
        "produce 1 KiB"
    ]["met"]


def test_the_tables_hold_every_shape_ratio_and_pacing() -> None:
    measured = {"kshim": throughput(1000, 800), "kafka": throughput(900, 450)}
    results = {
        "kafka": "org.apache.kafka:kafka_2.13:3.9.2",
        "arguments": {"repeats": 3},
        "command": "python -m benchmarks.security_kafka",
        "finished": "2026-11-28 16:00 UTC",
        "machine": {"cpus": 2},
        "idle_rss_mb": {"kshim": 40.0, "kafka": 400.0},
        "throughput": measured,
        "targets": targets(measured),
    }
    text = render(results)
    assert "| consume 1 KiB | 1,000 | 800 | 0.80 | 900 | 450 | 0.50 |" in text
    assert "| consume 1 KiB | SASL_SSL | 0.50 / 0.90 | 0.50 / 0.90 |" in text
    assert "- consume 1 KiB: kshim 0.80, Kafka 0.50: met" in text
