"""What sets the consume rate of 100-byte records: the broker, or the client's own pacing?

    python -m benchmarks.consume_pacing [--records N] [--repeats N]

With its default settings librdkafka stops fetching once 100,000 records wait in
its local queue (queued.min.messages) and then waits up to fetch.queue.backoff.ms
(1,000 ms) before fetching again, so a Python loop that drains the queue faster
than that idles. This runs the benchmark's consume workload on each broker with
the defaults, then with that pause off and with a larger queue, and reports
records/s with the client's busy cores (its process CPU over the elapsed time).
Writes benchmarks/results/consume_pacing.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.brokers import running
from benchmarks.workloads import consume, create_topic, produce

VARIANTS: dict[str, dict[str, object]] = {
    "defaults": {},
    "fetch.queue.backoff.ms=0": {"fetch.queue.backoff.ms": 0},
    "queued.min.messages=1000000": {"queued.min.messages": 1_000_000},
}
RESULTS = Path(__file__).parent / "results" / "consume_pacing.json"


def measure(records: int, repeats: int) -> dict[str, dict[str, dict[str, list[float]]]]:
    """{broker: {variant: {"records_per_s": [...], "client_cores": [...]}}}"""
    found: dict[str, dict[str, dict[str, list[float]]]] = {}
    for _ in range(repeats):
        for name in ("kshim", "tansu"):
            with running(name) as broker:
                create_topic(broker, "pacing")
                produce(broker, "pacing", records, 100, **{"linger.ms": 5})
                for variant, config in VARIANTS.items():
                    result = consume(broker, "pacing", records, 100, **config)
                    slot = found.setdefault(name, {}).setdefault(variant, {})
                    slot.setdefault("records_per_s", []).append(result.records_per_second)
                    slot.setdefault("client_cores", []).append(result.client_cores)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    found = measure(arguments.records, arguments.repeats)
    print("| consumer settings | kshim records/s | Tansu records/s | kshim / Tansu "
          "| client cores (kshim, Tansu) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for variant in VARIANTS:
        ours, theirs = found["kshim"][variant], found["tansu"][variant]
        rate, other = (statistics.median(side["records_per_s"]) for side in (ours, theirs))
        cores = [statistics.median(side["client_cores"]) for side in (ours, theirs)]
        print(f"| {variant} | {rate:,.0f} | {other:,.0f} | {rate / other:.2f}x "
              f"| {cores[0]:.2f}, {cores[1]:.2f} |")  # fmt: skip
    RESULTS.write_text(json.dumps({"records": arguments.records, "results": found}, indent=1))


if __name__ == "__main__":
    main()
