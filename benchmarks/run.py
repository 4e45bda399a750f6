"""Side-by-side performance runs: kshim next to Apache Kafka (two ways) and Tansu.

    python -m benchmarks.run                      # full run, roughly 40 minutes on 2 cores
    python -m benchmarks.run --quick --output /tmp/quick   # smaller counts, 2 repeats
    python -m benchmarks.run --repeats 5 --brokers kshim,kafka,kafka-fsync,kafka4
    python -m benchmarks.run --render-only        # report.md and plots again from report.json
    python -m benchmarks.run --baseline DIR       # also kshim from checkout DIR (an A/B)
    python -m benchmarks.run --kafka-bootstrap host:9092   # kafka: one already running
    python -m benchmarks.run --kafka-cmd '.../kafka-server-start.sh ... {port} {data_dir}'
    python -m benchmarks.run --smoke --output /tmp/smoke   # tiny counts: does it all run?
    python -m benchmarks.readme                   # README.md's table from report.json

Every workload starts each broker in turn on a fresh data dir, with the same
clients and settings; within a repeat the brokers alternate workload by workload,
so background noise hits them alike. The Kafka columns (benchmarks/kafka_columns.py):
``kafka``, Apache Kafka 3.9 from the pinned jars with its defaults (it acknowledges before
fsync), unless KSHIM_KAFKA_BOOTSTRAP (--kafka-bootstrap) names one already running or
KSHIM_KAFKA_CMD (--kafka-cmd) one to start per workload (compat_tests/kafka_sources.py);
``kafka-fsync``, the same jars fsyncing every batch before its acknowledgement as kshim
does; ``kafka4`` (Kafka 4, only when named). An already running Kafka is shared by every
sample (unique topic names) and its CPU, memory, disk and start time are "not measured".
Writes benchmarks/results/report.json, report.md, readme_table.md (the README's block,
benchmarks/readme.py) and PNG plots; the median and the spread (min, max) of every metric,
the targets as ratios to Kafka (benchmarks/targets.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import ceilings, kafka_columns, plots, readme, report, targets
from benchmarks.accumulation import accumulation, idle_connections
from benchmarks.brokers import (
    BASELINE,
    BROKER_NAMES,
    RunningBroker,
    running,
    sampled,
    unavailable_reason,
)
from benchmarks.venus_transmission import CLIENTS, transmission
from benchmarks.workloads import (
    consume,
    consume_raw,
    create_topic,
    end_to_end_latency,
    percentile,
    produce,
    produce_transactional,
    warm_up,
)
from compat_tests.kafka_sources import BOOTSTRAP_VARIABLE, COMMAND_VARIABLE, kafka_source
from kshim.progress import Progress, to_stream

RESULTS = Path(__file__).parent / "results"
Metrics = dict[str, float]


@dataclass(frozen=True)
class Scale:
    repeats: int
    records_100b: int
    records_1kib: int
    latency_s: float
    venus_records: int
    backlog_records: int
    backlog_extension_records: int
    idle_connections: int
    idle_produce_records: int
    txn_records: int
    view_updates: int
    view_keys: int
    # Untimed traffic before a workload's clock starts (benchmarks.workloads.warm_up):
    # seconds of records produced as fast as the client can, then read back; and seconds of
    # the latency workload's own paced records before its timed ones.
    warm_up_s: float = 0.0
    latency_warm_up_s: float = 0.0


FULL = Scale(5, 500_000, 200_000, 15.0, 100_000, 200_000, 1_800_000, 500, 200_000, 200_000,
             100_000, 10_000, 3.0, 5.0)  # fmt: skip
QUICK = Scale(2, 100_000, 40_000, 5.0, 20_000, 200_000, 0, 500, 30_000, 40_000, 20_000, 2_000,
              2.0, 3.0)  # fmt: skip
# Only that every workload runs on every broker (the runner's own tests use it); its numbers
# mean nothing.
SMOKE = Scale(1, 2_000, 1_000, 1.0, 1_000, 2_000, 0, 10, 1_000, 1_000, 1_000, 100, 0.2, 0.5)
RECORDS_PER_TRANSACTION = 1000
NOT_MEASURED = "an already running Kafka: its processes are not ours to read"
DEFAULT_BROKERS = ("kshim", kafka_columns.DEFAULT, kafka_columns.FSYNC, "tansu")


def throughput(broker: RunningBroker, scale: Scale) -> Metrics:
    """Workloads 1 and 2: produce (acks=all, idempotent), then consume from earliest with
    confluent-kafka, then again with raw Fetch requests (the broker's side alone)."""
    metrics: Metrics = {}
    for size, count in ((100, scale.records_100b), (1024, scale.records_1kib)):
        topic = broker.topic(f"bench-{size}")
        create_topic(broker, topic)
        produced = produce(broker, topic, count, size, **{"linger.ms": 5})
        consumed = consume(broker, topic, count, size)
        raw = consume_raw(broker, topic, count, size)
        phases = (("produce", produced), ("consume", consumed), ("consume_raw", raw))
        for phase, result in phases:
            label = f"{phase}_{'100B' if size == 100 else '1KiB'}"
            metrics[f"{label}_records_per_s"] = result.records_per_second
            metrics[f"{label}_mb_per_s"] = result.megabytes_per_second
            metrics[f"{label}_broker_cpu_us_per_record"] = result.broker_cpu_microseconds_per_record
            # Near 1 core, the client's busiest thread set the rate; with the broker's cores,
            # the client's whole process tells when the two filled the machine (who_paced.py).
            metrics[f"{label}_busiest_client_thread_cores"] = result.busiest_client_thread_cores
            metrics[f"{label}_client_cores"] = result.client_cores
    return metrics


# A producer after low latency sends each record at once (librdkafka's linger.ms is 5 by
# default); the consumer either waits for data as long as librdkafka's default lets a
# fetch wait (fetch.wait.max.ms=500: an idle partition's fetch is parked on the broker
# until a record arrives) or asks again every 10 ms.
LATENCY_PRODUCER = {"linger.ms": 0, "acks": "all"}
LATENCY_CONSUMERS = {"": {}, "fetch_wait_10ms_": {"fetch.wait.max.ms": 10}}


def latency(broker: RunningBroker, scale: Scale) -> Metrics:
    """Workload 3: 1,000 records/s, sent at once (linger.ms=0, acks=all), read with each
    consumer setting; the same pace untimed first, on the same topic and connections
    (Kafka's p50 in its first seconds on a fresh topic was tens of times its steady
    state's in a trial here). End-to-end and acknowledgement percentiles."""
    metrics: Metrics = {}
    for prefix, consumer_config in LATENCY_CONSUMERS.items():
        topic = broker.topic(f"latency-{prefix or 'default'}".rstrip("_"))
        create_topic(broker, topic)
        measured = end_to_end_latency(
            broker, topic, 1000, scale.latency_s, scale.latency_warm_up_s,
            LATENCY_PRODUCER, consumer_config,
        )  # fmt: skip
        metrics |= {f"{prefix}{name}": value for name, value in measured.items()}
    return metrics


def venus(broker: RunningBroker, scale: Scale) -> Metrics:
    """Workload 4: first send to last receive of N JSON row changes, per client."""
    metrics: Metrics = {}
    for client in CLIENTS:
        result = transmission(broker, client, scale.venus_records)
        metrics[f"{client}_seconds"] = result["seconds"]
        metrics[f"{client}_records_per_s"] = result["records_per_s"]
        metrics[f"{client}_send_seconds"] = result["send_seconds"]
        metrics[f"{client}_producer_cpu_s"] = result["producer_cpu_s"]
        metrics[f"{client}_consumer_cpu_s"] = result["consumer_cpu_s"]
    return metrics


def backlog(broker: RunningBroker, scale: Scale) -> Metrics:
    """Workload 5: the LSMQ accumulation test on a just-started broker."""
    return accumulation(broker, scale.backlog_records, scale.backlog_extension_records)


def idle(broker: RunningBroker, scale: Scale) -> Metrics:
    """Workload 6: idle connections plus one producer."""
    return idle_connections(broker, scale.idle_connections, scale.idle_produce_records)


def transactional(broker: RunningBroker, scale: Scale) -> Metrics:
    """Workload 7 (first half): transactions of 1,000 100-byte records; the rate, and the
    time each commit took (its last records' flush, then EndTxn)."""
    topic = broker.topic("txn")
    create_topic(broker, topic)
    result = produce_transactional(broker, topic, scale.txn_records, 100, RECORDS_PER_TRANSACTION)
    commits = sorted(result.commit_ms)
    return {
        "records_per_s": result.records_per_second,
        "broker_cpu_us_per_record": result.broker_cpu_microseconds_per_record,
        "commit_p50_ms": percentile(commits, 0.50),
        "commit_p99_ms": percentile(commits, 0.99),
    }


WORKLOADS: dict[str, Callable[[RunningBroker, Scale], Metrics]] = {
    "throughput": throughput,
    "latency": latency,
    "venus": venus,
    "accumulation": backlog,
    "idle_connections": idle,
    "transactional": transactional,
}


# Workloads that get benchmarks.workloads.warm_up first: all but the one that measures a
# broker as it starts (accumulation: its start time, idle memory, first produce).
WARMED_UP = ("throughput", "latency", "venus", "idle_connections", "transactional")


def run_sample(name: str, workload: str, scale: Scale, results: dict[str, Any]) -> Metrics | str:
    """One workload on one fresh broker (or the shared, already running Kafka, whose
    process metrics are left out); a failure is recorded as its message. The names of the
    processes measured and the settings read back from a Kafka go into ``results``."""
    try:
        with running(name) as broker:
            if scale.warm_up_s and workload in WARMED_UP:
                per_transaction = RECORDS_PER_TRANSACTION if workload == "transactional" else 0
                warm_up(broker, scale.warm_up_s, per_transaction)
            with sampled(broker) as usage:
                metrics = WORKLOADS[workload](broker, scale)
            observe(results, broker)
        metrics["broker_cpu_s"] = usage.cpu_seconds
        metrics["broker_peak_rss_mb"] = usage.peak_rss_bytes / 1e6
        if not broker.measured:
            metrics = {key: value for key, value in metrics.items()
                       if not report.is_process_metric(key)}  # fmt: skip
        return metrics
    except Exception as error:  # one broker failing a workload must not stop the run
        traceback.print_exc()
        return f"{type(error).__name__}: {error}"


def observe(results: dict[str, Any], broker: RunningBroker) -> None:
    """Adds what the broker's processes were called (the JVM's "java" for a Kafka: what its
    CPU and RSS figures are of) and the settings it reported."""
    seen = results["processes"].setdefault(broker.name, [])
    seen[:] = sorted({*seen, *broker.process_names()})
    if broker.settings:
        results["broker_settings"][broker.name] = broker.settings


def full_view_apply(scale: Scale) -> Metrics | str:
    """Workload 7 (second half): the lead's benchmarks.full_view, run as a subprocess."""
    with tempfile.TemporaryDirectory(prefix="bench-view-") as directory:
        output = Path(directory) / "full_view.json"
        command = [sys.executable, "-m", "benchmarks.full_view", "--updates",
                   str(scale.view_updates), "--keys", str(scale.view_keys),
                   "--json", str(output)]  # fmt: skip
        try:
            finished = subprocess.run(
                command, check=False, capture_output=True, text=True, timeout=600
            )
        except subprocess.TimeoutExpired:
            return "benchmarks.full_view did not finish in 600 s"
        if finished.returncode != 0 or not output.exists():
            tail = (finished.stderr or finished.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"benchmarks.full_view failed (exit {finished.returncode}): {tail[0]}"
        return numbers(json.loads(output.read_text()))


def numbers(data: dict[str, Any], prefix: str = "") -> Metrics:
    """The numeric fields of full_view's JSON, flat or one level per mode ("process.x");
    its list of individual runs is left out (the runner repeats it itself)."""
    metrics: Metrics = {}
    for key, value in data.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            metrics[prefix + key] = float(value)
        elif isinstance(value, dict) and not prefix:
            metrics.update(numbers(value, f"{key}."))
    return metrics


def machine(scale: Scale) -> dict[str, Any]:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")), platform.processor())  # fmt: skip
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e9, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        **ceilings.measure(0.2 if scale == SMOKE else 2.0),  # a smoke run measures nothing
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, 2 repeats")
    parser.add_argument("--smoke", action="store_true", help="tiny counts, 1 repeat: runs?")
    parser.add_argument(
        "--kafka-bootstrap",
        metavar="HOST:PORT",
        help=f"an already running Kafka (sets {BOOTSTRAP_VARIABLE})",
    )
    parser.add_argument(
        "--kafka-cmd",
        metavar="COMMAND",
        help=f"starts Kafka, with {{port}} and {{data_dir}} ({COMMAND_VARIABLE})",
    )
    parser.add_argument("--repeats", type=int, help="repeats per workload (default 5; quick 2)")
    parser.add_argument(
        "--brokers", default=",".join(DEFAULT_BROKERS), help=f"of {', '.join(BROKER_NAMES)}"
    )
    parser.add_argument("--workloads", default=",".join([*WORKLOADS, "full_view"]))
    parser.add_argument("--baseline", metavar="DIR", help="also kshim from this checkout")
    parser.add_argument(
        "--render-only", action="store_true", help="rewrite report.md and plots from report.json"
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="where the report goes")
    arguments = parser.parse_args()
    if arguments.render_only:
        write(json.loads((arguments.output / "report.json").read_text()), arguments.output)
        return
    choose_kafka(parser, arguments.kafka_bootstrap, arguments.kafka_cmd)
    scale_name = "smoke" if arguments.smoke else "quick" if arguments.quick else readme.FULL
    scale = {"smoke": SMOKE, "quick": QUICK, readme.FULL: FULL}[scale_name]
    if arguments.repeats:
        scale = Scale(**{**asdict(scale), "repeats": arguments.repeats})
    wanted = [name.strip() for name in arguments.brokers.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(BROKER_NAMES))
    if unknown:
        parser.error(f"unknown brokers {unknown}; choose from {', '.join(BROKER_NAMES)}")
    skipped = {name: reason for name in wanted if (reason := unavailable_reason(name))}
    brokers = [name for name in wanted if name not in skipped]
    if arguments.baseline:  # next to kshim, so the two alternate within each workload
        os.environ["KSHIM_BASELINE_DIR"] = arguments.baseline
        brokers.insert(1 if "kshim" in brokers else 0, BASELINE)
    workloads = [name.strip() for name in arguments.workloads.split(",") if name.strip()]
    started = time.monotonic()
    results: dict[str, Any] = {
        "generated_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m benchmarks.run " + " ".join(sys.argv[1:]),
        "machine": machine(scale),
        "scale": asdict(scale),
        "scale_name": scale_name,
        "brokers": brokers,
        "skipped": skipped,
        "kafka": kafka_columns.describe("kafka") if "kafka" in brokers else None,
        "kafka_columns": {
            name: kafka_columns.describe(name) for name in brokers if kafka_columns.is_kafka(name)
        },
        "not_measured": {"kafka": NOT_MEASURED} if kafka_is_shared(brokers) else {},
        "processes": {},
        "broker_settings": {},
        "samples": {name: {broker: [] for broker in brokers} for name in WORKLOADS},
        "full_view": [],
    }
    chosen = [name for name in WORKLOADS if name in workloads]
    # A bar on a terminal, a line per sample otherwise: share done, samples a second.
    progress = Progress("samples", scale.repeats * len(chosen) * len(brokers), "samples",
                        to_stream(sys.stdout), interval_s=0.0)  # fmt: skip
    for repeat in range(scale.repeats):
        for workload in chosen:
            for broker in brokers:
                progress.what = f"repeat {repeat + 1}: {workload} on {broker}"
                sample = run_sample(broker, workload, scale, results)
                results["samples"][workload][broker].append(sample)
                progress.advance()
        if "full_view" in workloads:
            results["full_view"].append(full_view_apply(scale))
    progress.what = "samples"
    progress.finish()
    results["elapsed_s"] = time.monotonic() - started
    write(results, arguments.output)


def choose_kafka(
    parser: argparse.ArgumentParser, bootstrap: str | None, command: str | None
) -> None:
    """The command line's Kafka, over the environment's (the child processes see it too)."""
    if bootstrap and command:
        parser.error("--kafka-bootstrap and --kafka-cmd name two Kafkas; give one")
    if bootstrap:
        os.environ[BOOTSTRAP_VARIABLE] = bootstrap
    if command:
        os.environ.pop(BOOTSTRAP_VARIABLE, None)  # it would take priority
        os.environ[COMMAND_VARIABLE] = command
    try:
        kafka_source()
    except ValueError as error:
        parser.error(str(error))


def kafka_is_shared(brokers: list[str]) -> bool:
    return "kafka" in brokers and kafka_source().external


def write(results: dict[str, Any], directory: Path) -> None:
    """Summarises, checks the targets, writes report.json, report.md and the plots."""
    results["summary"] = report.summarise(results)
    results["targets"] = targets.check_targets(results["summary"])
    directory.mkdir(parents=True, exist_ok=True)
    results["plots"] = plots.draw(results, directory)
    (directory / "report.json").write_text(json.dumps(results, indent=2))
    markdown = report.render(results)
    (directory / "report.md").write_text(markdown)
    (directory / "readme_table.md").write_text(readme.block(results) + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
