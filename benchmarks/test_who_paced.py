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


def test_broker_and_client_filling_the_machine_are_marked_as_what_set_the_rate() -> None:
    figures = summary(0.6, 0.6)
    figures["throughput.produce_100B_client_cores"] = {"kshim": cell(1.65), "kafka": cell(1.2)}
    lines = paced_lines({**RESULTS, "machine": {"cores": 2}}, figures)
    row = next(line for line in lines if line.startswith("| produce 100 B |"))
    # kshim: 0.20 + 1.65 >= 0.9 of 2 cores; Kafka: 0.40 + 1.20 is not.
    assert row == "| produce 100 B | 0.20 / 0.60 / 1.65 (machine) | 0.40 / 0.60 / 1.20 |"
