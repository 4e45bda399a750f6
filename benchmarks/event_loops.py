"""kshim on uvloop against kshim on asyncio's own loop, with Tansu for scale, side by side.

    python -m benchmarks.event_loops [--repeats N] [--latency-seconds S]

Each repeat starts each broker in turn on a fresh data dir and measures, over one raw
connection, the rate and broker CPU per request of Metadata (v9, one topic) and of
acks=all Produce (one ~16 KB batch, 1 and 5 in flight, as benchmarks.pipelined_produce),
then the end-to-end latency at 1,000 records/s with confluent-kafka's default settings
(benchmarks.workloads.end_to_end_latency) and the VENUS transmission time of 100,000 rows
with kafka-python (benchmarks.venus_transmission). Prints medians and writes
benchmarks/results/event_loops.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.brokers import RunningBroker, running
from benchmarks.pipelined_produce import produce_frame
from benchmarks.pipelined_produce import run as run_requests
from benchmarks.venus_transmission import transmission
from benchmarks.workloads import create_topic, end_to_end_latency
from kshim.client.frames import encode_request

METADATA_KEY, METADATA_VERSION = 3, 9
VARIANTS = {
    "kshim (uvloop)": ("kshim", ["kshim.event.loop=uvloop"]),
    "kshim (asyncio)": ("kshim", ["kshim.event.loop=asyncio"]),
    "tansu": ("tansu", []),
}
RESULTS = Path(__file__).parent / "results" / "event_loops.json"
TOPIC = "loops"
VENUS_ROWS = 100_000


def request_frames() -> dict[str, tuple[bytes, int, int]]:
    """{label: (frame, requests, in flight)}."""
    metadata = encode_request(METADATA_KEY, METADATA_VERSION, 1, {
        "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})  # fmt: skip
    produce = produce_frame(TOPIC)
    return {
        "metadata, 1 in flight": (metadata, 3000, 1),
        "produce 16 KB, 1 in flight": (produce, 2000, 1),
        "produce 16 KB, 5 in flight": (produce, 2000, 5),
    }


def measure(broker: RunningBroker, latency_s: float) -> dict[str, float]:
    create_topic(broker, TOPIC)
    found: dict[str, float] = {}
    for label, (frame, requests, depth) in request_frames().items():
        result = run_requests(broker, frame, requests, depth)
        found[f"{label}: requests/s"] = result["requests_per_s"]
        found[f"{label}: user µs/request"] = result["user_us_per_request"]
        found[f"{label}: system µs/request"] = result["system_us_per_request"]
    create_topic(broker, "latency")
    latency = end_to_end_latency(broker, "latency", 1000, latency_s)
    found["latency at 1,000 records/s: p50 ms"] = latency["p50_ms"]
    found["latency at 1,000 records/s: p99 ms"] = latency["p99_ms"]
    venus = transmission(broker, "kafka-python", VENUS_ROWS)
    found["VENUS kafka-python: seconds"] = venus["seconds"]
    found["VENUS kafka-python: producer CPU s"] = venus["producer_cpu_s"]
    found["VENUS kafka-python: consumer CPU s"] = venus["consumer_cpu_s"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    arguments = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {}
    for _ in range(arguments.repeats):
        for variant, (name, settings) in VARIANTS.items():
            with running(name, settings) as broker:
                for metric, value in measure(broker, arguments.latency_seconds).items():
                    samples.setdefault(metric, {}).setdefault(variant, []).append(value)
    names = list(VARIANTS)
    print("| metric | " + " | ".join(names) + " | uvloop / asyncio |")
    print("|---|" + "---|" * (len(names) + 1))
    for metric, by_variant in samples.items():
        medians = [statistics.median(by_variant[variant]) for variant in names]
        cells = " | ".join(f"{value:,.2f}" if value < 100 else f"{value:,.0f}" for value in medians)
        print(f"| {metric} | {cells} | {medians[0] / medians[1]:.2f}x |")
    RESULTS.write_text(json.dumps({"repeats": arguments.repeats, "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
