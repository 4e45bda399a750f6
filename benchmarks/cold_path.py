"""One record's trip through the broker when requests come one at a time after idle gaps,
as in the 1,000 records/s latency test, against the same requests back to back.

    python -m benchmarks.cold_path [--trips N] [--repeats N]

The machine first: a fixed piece of pure-Python work (decoding 15 small JSON documents),
its CPU µs back to back and after a 5 ms sleep each (the sleep's own system call counts).
Then the brokers: a raw client parks a Fetch (a long poll of up to 500 ms) on one
connection and sends an acks=all Produce of 5 records on another; the time from the send
until the Fetch answer arrives is the broker's share of end-to-end latency. Gaps of 0 and
4 ms between trips (librdkafka's default linger.ms of 5 makes about 150-200 Produce
requests/s at 1,000 records/s). kshim runs with its default fsync on every commit and with
fsync off, to separate the disk; Tansu for scale (it re-checks parked fetches by sleeping,
so its answers wait for that). Writes benchmarks/results/cold_path.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.brokers import running
from benchmarks.pipelined_produce import produce_frame
from benchmarks.samples import Samples, add_samples, median_rows
from benchmarks.workloads import create_topic
from kshim.client.frames import encode_request
from kshim.client.wire import connect
from kshim.testing import fetch_fields

FETCH_KEY, FETCH_VERSION = 1, 12
TOPIC = "trips"
RECORDS_PER_TRIP = 5
GAPS_S = (0.0, 0.004)
PAUSE_S = 0.005
TANSU_TRIPS = 60  # each waits for Tansu's sleeping re-check, ~100+ ms
VARIANTS: dict[str, tuple[str, Sequence[str]]] = {
    "kshim": ("kshim", ()),
    "kshim, fsync off": ("kshim", ("log.flush.interval.messages=4611686018427387904",)),
    "tansu": ("tansu", ()),
}
RESULTS = Path(__file__).parent / "results" / "cold_path.json"
DOCUMENTS = [json.dumps({"id": i, "tags": [1, 2, 3], "text": "x" * 50}) for i in range(15)]


def python_work_cpu_us(pause_s: float, pieces: int) -> float:
    """CPU µs per piece of pure-Python work, each followed by a sleep of ``pause_s``."""
    started = time.process_time()
    for _ in range(pieces):
        for document in DOCUMENTS:
            json.loads(document)
        if pause_s:
            time.sleep(pause_s)
    return (time.process_time() - started) / pieces * 1e6


def trips(bootstrap: str, first_offset: int, count: int, gap_s: float) -> list[float]:
    """µs from each Produce's send to its parked Fetch's answer."""
    frame = produce_frame(TOPIC, records=RECORDS_PER_TRIP, value_bytes=20)
    offset = first_offset
    found = []
    with connect(bootstrap) as producer, connect(bootstrap) as consumer:
        for _ in range(count):
            consumer.send(
                encode_request(FETCH_KEY, FETCH_VERSION, 1, fetch_fields(TOPIC, 0, offset, 500))
            )
            time.sleep(gap_s)  # the fetch parks; with no gap it may meet the data instead
            sent = time.perf_counter()
            producer.send(frame)
            consumer.read_frame()
            found.append((time.perf_counter() - sent) * 1e6)
            producer.read_frame()
            offset += RECORDS_PER_TRIP
    return found


def measure(variant: str, count: int) -> dict[str, dict[str, float]]:
    name, settings = VARIANTS[variant]
    count = min(count, TANSU_TRIPS) if name == "tansu" else count
    found = {}
    with running(name, settings) as broker:
        create_topic(broker, TOPIC)
        trips(broker.bootstrap, 0, 20, 0.0)  # connections, code paths and the first segment warmed
        offset = 20 * RECORDS_PER_TRIP
        for gap_s in GAPS_S:
            user, system = broker.user_and_system_seconds()
            latencies = sorted(trips(broker.bootstrap, offset, count, gap_s))
            user_after, system_after = broker.user_and_system_seconds()
            offset += count * RECORDS_PER_TRIP
            found[f"gap {gap_s * 1000:g} ms"] = {
                "trip_p50_us": statistics.median(latencies),
                "trip_p90_us": latencies[int(len(latencies) * 0.9)],
                "broker_cpu_us_per_trip": (user_after - user + system_after - system) / count * 1e6,
            }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trips", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    machine: dict[str, list[float]] = {"back to back": [], f"after {PAUSE_S * 1000:g} ms": []}
    brokers: Samples = {}
    for _ in range(arguments.repeats):
        machine["back to back"].append(python_work_cpu_us(0.0, 10_000))
        machine[f"after {PAUSE_S * 1000:g} ms"].append(python_work_cpu_us(PAUSE_S, 1_000))
        for variant in VARIANTS:
            for gap, trip in measure(variant, arguments.trips).items():
                add_samples(brokers, variant, gap, trip)
    print("| pure-Python work | CPU µs per piece |\n|---|---|")
    for label, values in machine.items():
        print(f"| {label} | {statistics.median(values):.0f} |")
    print("\n| broker | gap | trip p50 µs | trip p90 µs | broker CPU µs per trip |")
    print("|---|---|---|---|---|")
    for variant, gap, (p50, p90, cpu) in median_rows(brokers):
        print(f"| {variant} | {gap} | {p50:,.0f} | {p90:,.0f} | {cpu:,.0f} |")
    document = {"trips": arguments.trips, "machine_cpu_us": machine, "results": brokers}
    RESULTS.write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
