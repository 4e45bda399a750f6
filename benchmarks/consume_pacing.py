"""What sets the consume rate of 100-byte records: the broker, or the client's own pacing?

    python -m benchmarks.consume_pacing [--records N] [--repeats N]

With its default settings librdkafka stops fetching once 100,000 records wait in
its local queue (queued.min.messages) and then waits up to fetch.queue.backoff.ms
(1,000 ms) before fetching again, so a Python loop that drains the queue faster
than that idles. This runs the benchmark's consume workload on each broker with
the defaults, then with that pause off and with a larger queue, and reports
records/s with the client's busy cores (its process CPU over the elapsed time).
Last it reads with kcat, a C consumer on the same librdkafka with no Python loop,
to show what a cheaper client leaves for the broker to set. Also reports each
broker's CPU per record. Writes benchmarks/results/consume_pacing.json.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.brokers import RunningBroker, running
from benchmarks.workloads import TIMEOUT_S, Throughput, consume, create_topic, produce

VARIANTS: dict[str, dict[str, object]] = {
    "defaults": {},
    "fetch.queue.backoff.ms=0": {"fetch.queue.backoff.ms": 0},
    "queued.min.messages=1000000": {"queued.min.messages": 1_000_000},
}
KCAT = "kcat (C client, defaults)"
RESULTS = Path(__file__).parent / "results" / "consume_pacing.json"


@contextlib.contextmanager
def bundled_librdkafka() -> Iterator[dict[str, str]]:
    """An environment that loads confluent-kafka's own librdkafka into kcat: Debian's
    kcat links librdkafka 2.0.2, which misreads Tansu's ApiVersions v3 answer and never
    connects, and the same library on both sides keeps the comparison with the Python
    client fair."""
    import confluent_kafka

    site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    libraries = glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"))
    with tempfile.TemporaryDirectory(prefix="kcat-lib-") as directory:
        if libraries:
            os.symlink(libraries[0], os.path.join(directory, "librdkafka.so.1"))
        yield {**os.environ, "LD_LIBRARY_PATH": directory}


def consume_with_kcat(broker: RunningBroker, topic: str, count: int, kcat: str) -> Throughput:
    """Reads ``count`` records from offset 0 with kcat, output discarded."""
    command = [kcat, "-C", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-o", "beginning",
               "-c", str(count), "-e", "-q", "-f", "%o\\n"]  # fmt: skip
    with bundled_librdkafka() as environment:
        cpu_before, children_before = broker.cpu_seconds(), _children_cpu_seconds()
        started = time.perf_counter()
        subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, check=True,
                       timeout=TIMEOUT_S)  # fmt: skip
        elapsed = time.perf_counter() - started
    client_cpu = _children_cpu_seconds() - children_before
    return Throughput(count, elapsed, 100, broker.cpu_seconds() - cpu_before, client_cpu)


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(records: int, repeats: int) -> dict[str, dict[str, dict[str, list[float]]]]:
    """{broker: {variant: {"records_per_s": [...], "client_cores": [...]}}}"""
    found: dict[str, dict[str, dict[str, list[float]]]] = {}
    kcat = shutil.which("kcat")
    if kcat is None:
        print("kcat is not installed (apt-get install kcat): its row is left out")
    for _ in range(repeats):
        for name in ("kshim", "tansu"):
            with running(name) as broker:
                create_topic(broker, "pacing")
                produce(broker, "pacing", records, 100, **{"linger.ms": 5})
                results = {
                    variant: consume(broker, "pacing", records, 100, **config)
                    for variant, config in VARIANTS.items()
                }
                if kcat is not None:
                    results[KCAT] = consume_with_kcat(broker, "pacing", records, kcat)
                for variant, result in results.items():
                    slot = found.setdefault(name, {}).setdefault(variant, {})
                    slot.setdefault("records_per_s", []).append(result.records_per_second)
                    slot.setdefault("client_cores", []).append(result.client_cores)
                    slot.setdefault("broker_cpu_us_per_record", []).append(
                        result.broker_cpu_microseconds_per_record
                    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    found = measure(arguments.records, arguments.repeats)
    print("| consumer | kshim records/s | Tansu records/s | kshim / Tansu "
          "| client cores (kshim, Tansu) | broker CPU µs/record (kshim, Tansu) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for variant in found["kshim"]:
        sides = (found["kshim"][variant], found["tansu"][variant])
        rate, other = (statistics.median(side["records_per_s"]) for side in sides)
        cores = [statistics.median(side["client_cores"]) for side in sides]
        broker = [statistics.median(side["broker_cpu_us_per_record"]) for side in sides]
        print(f"| {variant} | {rate:,.0f} | {other:,.0f} | {rate / other:.2f}x "
              f"| {cores[0]:.2f}, {cores[1]:.2f} | {broker[0]:.2f}, {broker[1]:.2f} |")  # fmt: skip
    RESULTS.write_text(json.dumps({"records": arguments.records, "results": found}, indent=1))


if __name__ == "__main__":
    main()
