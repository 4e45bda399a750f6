"""The report's "who set the rate" section, from a result's medians (benchmarks/who_paced.py)."""

from __future__ import annotations

from typing import Any

from benchmarks.targets import Summary
from benchmarks.who_paced import paced_lines


def cell(value: float) -> dict[str, float]:
    return {"median": value, "min": value, "max": value, "n": 1}


def summary(kshim_client: float, kafka_client: float) -> Summary:
    return {
        "throughput.produce_100B_records_per_s": {"kshim": cell(500_000), "kafka": cell(400_000)},
        "throughput.produce_100B_broker_cpu_us_per_record": {"kshim": cell(0.4), "kafka": cell(1)},
        "throughput.produce_100B_busiest_client_thread_cores": {
            "kshim": cell(kshim_client),
            "kafka": cell(kafka_client),
        },
    }


RESULTS: dict[str, Any] = {"brokers": ["kshim", "kafka"]}


def test_a_client_thread_near_a_core_is_marked_as_what_set_the_rate() -> None:
    lines = paced_lines(RESULTS, summary(0.97, 0.6))
    row = next(line for line in lines if line.startswith("| produce 100 B |"))
    assert row == "| produce 100 B | 0.20 / 0.97 (client) | 0.40 / 0.60 |"


def test_no_section_for_a_result_without_client_figures() -> None:
    assert paced_lines(RESULTS, {}) == []
