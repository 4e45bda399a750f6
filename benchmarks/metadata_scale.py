"""Metadata at scale: how long kshim takes to describe 1,000 and 10,000 topics.

    python -m benchmarks.metadata_scale [--topics 1000 10000] [--repeats 3] [--baseline DIR]

For each N, a broker gets N single-partition topics (CreateTopics in batches of 1,000);
each has its full-data view ``T.full`` (on by default), which an all-topics answer leaves
out (pattern subscriptions would match it), so that answer lists N topics. Then, per
Metadata version (v1 as kafka-python and aiokafka's generation, v12 as librdkafka and
Java 3.9 send it), three requests:

- all topics: a null topic list (v1+);
- N named topics: every stored topic by name, as librdkafka asks for the topics it
  produces to (at 1,500 topics ~36 KB of names);
- one named topic.

Each request is encoded once and sent back to back on one connection until at least
``MIN_SENDS`` answers and ``MIN_SECONDS`` have passed; the latency is from the send to the
whole answer read (not decoded), the broker's CPU is its process tree's user and system
time over those requests divided by their number (one clock tick is 10 ms, hence the
many requests): it also counts what the median latency hides, such as a full garbage
collection every few requests. One answer per case is decoded to check that it lists what
it should. Once per broker and N: the first all-topics answer after the topics were
created (nothing kept encoded yet) and the broker's RSS at the end.
With ``--baseline``, kshim from that checkout (an earlier commit, e.g. a ``git archive``
of it) runs beside this tree's, alternately, for a before/after in one session.

Writes benchmarks/results/metadata_scale.json (each repeat's figures and their medians).
The broker keeps about two file descriptors per partition, so this process raises its
soft ``ulimit -n`` to the hard limit before starting brokers (which inherit it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.brokers import BASELINE, RunningBroker, running
from benchmarks.samples import Samples, add_samples, median_rows
from kshim.client.frames import decode_response, encode_body
from kshim.client.wire import WireConnection, connect
from kshim.protocol import codec

METADATA_KEY, CREATE_TOPICS_KEY, CREATE_TOPICS_VERSION = 3, 19, 4
VERSIONS = (1, 12)
CREATE_BATCH = 1_000
CREATE_TIMEOUT_S = 600.0
MIN_SENDS = 5
MIN_SECONDS = 2.0
VIEW_SUFFIX = ".full"  # a full-data view, answered only when named
RESULTS = Path(__file__).parent / "results" / "metadata_scale.json"


@dataclass(frozen=True, slots=True)
class Case:
    label: str
    version: int
    names: Sequence[str] | None  # None: all topics
    expected_topics: int


def raise_descriptor_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: brokers started later inherit it."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def topic_names(count: int) -> list[str]:
    return [f"scale-{index:05d}" for index in range(count)]


def create_topics(broker: RunningBroker, names: Sequence[str]) -> None:
    """Creates every topic with one partition; raises RuntimeError for any refusal."""
    with connect(broker.bootstrap, CREATE_TIMEOUT_S) as connection:
        for start in range(0, len(names), CREATE_BATCH):
            batch = names[start : start + CREATE_BATCH]
            topics = [
                {"name": name, "num_partitions": 1, "replication_factor": 1} for name in batch
            ]
            fields = {"topics": topics, "timeout": int(CREATE_TIMEOUT_S * 1000)}
            answer = connection.call(CREATE_TOPICS_KEY, CREATE_TOPICS_VERSION, fields)
            failed = [topic.name for topic in answer.topics if topic.error_code != 0]
            if failed:
                raise RuntimeError(f"{len(failed)} topics not created, e.g. {failed[:3]}")


def cases(names: Sequence[str]) -> list[Case]:
    found = []
    for version in VERSIONS:
        found.append(Case(f"all topics v{version}", version, None, len(names)))
        found.append(Case(f"{len(names)} named v{version}", version, names, len(names)))
        found.append(Case(f"1 named v{version}", version, names[:1], 1))
    return found


def request_body(case: Case) -> bytes:
    topics = None if case.names is None else [{"name": name} for name in case.names]
    fields: dict[str, Any] = {"topics": topics, "allow_auto_topic_creation": False}
    return encode_body(METADATA_KEY, case.version, fields)


def check_answer(case: Case, frame: bytes) -> None:
    """Raises RuntimeError unless the answer lists the expected topics without errors."""
    _, answer = decode_response(METADATA_KEY, case.version, frame)
    listed = [topic.name for topic in answer.topics]
    errors = [topic.name for topic in answer.topics if topic.error_code != 0]
    if len(listed) != case.expected_topics or errors:
        raise RuntimeError(f"{case.label}: {len(listed)} topics listed, errors for {errors[:3]}")
    if case.names is None and any(name.endswith(VIEW_SUFFIX) for name in listed):
        raise RuntimeError(f"{case.label}: a full-data view is listed among all topics")


def measure(broker: RunningBroker, connection: WireConnection, case: Case) -> dict[str, float]:
    body = request_body(case)
    flexible = codec.is_flexible(METADATA_KEY, case.version)
    check_answer(case, connection.exchange(METADATA_KEY, case.version, body, flexible=flexible))
    latencies: list[float] = []
    cpu_before = broker.cpu_seconds()
    started = time.perf_counter()
    while len(latencies) < MIN_SENDS or time.perf_counter() - started < MIN_SECONDS:
        sent = time.perf_counter()
        connection.exchange(METADATA_KEY, case.version, body, flexible=flexible)
        latencies.append((time.perf_counter() - sent) * 1000)
    cpu_ms = (broker.cpu_seconds() - cpu_before) * 1000
    return {
        "latency_p50_ms": statistics.median(latencies),
        "latency_min_ms": min(latencies),
        "broker_cpu_ms_per_request": cpu_ms / len(latencies),
        "requests": len(latencies),
    }


@contextlib.contextmanager
def brokers_with_topics(names_of: Sequence[str], count: int) -> Iterator[list[RunningBroker]]:
    """Every broker of ``names_of`` running at once, each with ``count`` topics."""
    with contextlib.ExitStack() as stack:
        started = []
        for name in names_of:
            broker = stack.enter_context(running(name))
            creating = time.perf_counter()
            create_topics(broker, topic_names(count))
            print(f"{name}: {count} topics created in {time.perf_counter() - creating:.1f} s")
            started.append(broker)
        yield started


def first_answer_ms(connection: WireConnection, version: int) -> float:
    """The first all-topics answer after the topics were created: what kshim describes
    and encodes before it can answer from kept entries."""
    body = encode_body(METADATA_KEY, version, {"topics": None})
    sent = time.perf_counter()
    connection.exchange(
        METADATA_KEY, version, body, flexible=codec.is_flexible(METADATA_KEY, version)
    )
    return (time.perf_counter() - sent) * 1000


def run(brokers: Sequence[str], counts: Sequence[int], repeats: int) -> tuple[Samples, Samples]:
    """Per broker and (N, case), each repeat's figures, the brokers alternating per
    repeat; and per broker and N, the first all-topics answer and the RSS at the end."""
    samples: Samples = {}
    once: Samples = {}
    for count in counts:
        with brokers_with_topics(brokers, count) as running_brokers:
            connections = [
                connect(broker.bootstrap, CREATE_TIMEOUT_S) for broker in running_brokers
            ]
            try:
                for broker, connection in zip(running_brokers, connections, strict=True):
                    first = {"first_all_topics_v12_ms": first_answer_ms(connection, 12)}
                    add_samples(once, broker.name, f"{count} topics", first)
                for _ in range(repeats):
                    for broker, connection in zip(running_brokers, connections, strict=True):
                        for case in cases(topic_names(count)):
                            setting = f"{count} topics: {case.label}"
                            add_samples(
                                samples, broker.name, setting, measure(broker, connection, case)
                            )
                for broker in running_brokers:
                    rss = {"rss_mb_at_end": broker.rss_bytes() / 1e6}
                    add_samples(once, broker.name, f"{count} topics", rss)
            finally:
                for connection in connections:
                    connection.close()
    return samples, once


def print_table(samples: Samples) -> None:
    print("\n| broker | request | latency p50 ms | latency min ms | broker CPU ms per request |")
    print("|---|---|---|---|---|")
    for broker, setting, (p50, least, cpu, _) in median_rows(samples):
        print(f"| {broker} | {setting} | {p50:,.2f} | {least:,.2f} | {cpu:,.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--baseline", metavar="DIR", help="also run kshim from this checkout (an earlier commit)"
    )
    arguments = parser.parse_args()
    brokers = ["kshim"]
    if arguments.baseline:
        os.environ["KSHIM_BASELINE_DIR"] = arguments.baseline
        brokers.append(BASELINE)
    raise_descriptor_limit()
    samples, once = run(brokers, arguments.topics, arguments.repeats)
    print_table(samples)
    print("\n| broker | topics | first all-topics v12 answer ms | broker RSS MB at the end |")
    print("|---|---|---|---|")
    for broker, setting, (first, rss) in median_rows(once):
        print(f"| {broker} | {setting} | {first:,.1f} | {rss:,.0f} |")
    medians: dict[str, dict[str, dict[str, float]]] = {}
    for broker, setting, values in median_rows(samples):
        metrics = samples[broker][setting]
        medians.setdefault(broker, {})[setting] = dict(zip(metrics, values, strict=True))
    document = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "repeats": arguments.repeats,
        "medians": medians,
        "samples": samples,
        "once": once,
    }
    RESULTS.write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
