"""What TLS and SASL cost: kshim's PLAINTEXT and SASL_SSL listeners side by side, in one run
against one broker.

    python -m benchmarks.security [--records-1kib 300000] [--records-100b 300000]
                                  [--records-java 100000]
                                  [--repeats 5] [--connections 600] [--flood 1000]
                                  [--parts throughput,connections,floods]
                                  [--json benchmarks/results/security.json]

One ``kshim serve`` (defaults: fsync on, uvloop; CPU and RSS always of its whole process
tree) with a PLAINTEXT and a SASL_SSL listener (TLS 1.3, a trustme certificate; a SCRAM-SHA-256
user stored with AlterUserScramCredentials, a PLAIN user in the listener's JAAS config):

1. throughput: confluent-kafka produces (acks=all, idempotent, linger.ms=5) 1 KiB and 100 B
   records to a topic of their own, then consumes them from offset 0, over PLAINTEXT and over
   SASL_SSL with SCRAM-SHA-256, the listener that goes first alternating repeat by repeat.
   Each client's clock starts once it is connected and logged in (its first record
   acknowledged, its first batch read; how long that took is reported beside), so that a
   run of a few hundred milliseconds is not a login's measure: part 2 measures logins.
   Then the broker's side alone, with kshim's wire client (Python's ssl): the same 1 MiB
   Produce request of 1,000 1 KiB records sent again and again, five in flight, and the
   partition's first MiB fetched again and again, one Fetch at a time. Then, where
   Spark's connector jars hold kafka-clients (spark_examples/spark_session.py: the kshim.jvm
   cache or $KSHIM_SPARK_JARS) and java can run a source file, the Java client
   (benchmarks/java/JavaClients.java): ``--records-java`` 1 KiB records produced and read.
   Target: SASL_SSL keeps >= 0.7x of PLAINTEXT's records/s.
2. connections: ``--connections`` new connections of each kind, split over two client
   processes, each answered an ApiVersions: PLAINTEXT, TLS, and full logins over SASL_SSL
   (PLAIN, SCRAM-SHA-256). Connections per second and the broker's CPU per connection
   (the clients share the machine's cores with the broker: the CPU is the steadier figure).
3. flood: ``--flood`` logins with a wrong password from one peer (two client processes, 50
   at a time in all, each waiting for the broker to close its connection; a SCRAM guess's
   SaltedPassword computed once, as a flooding client would), while one authenticated
   confluent-kafka producer (SASL_SSL, SCRAM-SHA-256, 1 KiB records, as fast as it goes)
   produces; its records/s during the flood against the same producer just before and just
   after. Three floods: SCRAM-SHA-256 for a stored user, PLAIN for a JAAS user, PLAIN for a
   SCRAM user (checked against the stored credential: one Hi(), 4,096 HMACs, on the broker
   per guess). The broker's CPU per refused login is estimated as its CPU during the flood
   less the producer's records at their cost without it; an ApiVersions probe every 10 ms
   on a PLAINTEXT connection shows how long the event loop keeps a ready request waiting.
   Target: >= 0.9x.

Prints Markdown tables and writes the JSON.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import multiprocessing
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.brokers import RunningBroker, sampled
from benchmarks.client_threads import ThreadUsage
from benchmarks.pipelined_produce import pipelined, produce_frame
from benchmarks.security_clients import (
    CONNECTION_KINDS,
    FLOODS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    SecureBroker,
    connection_worker,
    flood_worker,
    librdkafka_settings,
    raw_fetch,
    raw_security,
    ready,
    running_secure,
)
from benchmarks.startup import API_VERSIONS_V0
from benchmarks.workloads import TIMEOUT_S, create_topic, send
from kshim.client.security import ClientSecurity
from kshim.client.wire import connect
from spark_examples.spark_session import connector_jars, connector_unavailable_reason

PROTOCOLS = ("PLAINTEXT", "SASL_SSL")
PARTS = ("throughput", "connections", "floods")
THROUGHPUT_TARGET = 0.7
FLOOD_TARGET = 0.9
CLIENT_PROCESSES = 2
FLOOD_CONCURRENCY = 50  # in all, over the client processes
WINDOW_S = 8.0  # the producer's run before and after each flood
FLOOD_RECORD_BYTES = 1024
PROBE_INTERVAL_S = 0.01
RAW_RECORDS = 1000  # 1 KiB records a raw request carries or fetches (about 1 MiB)
RAW_PRODUCE_REQUESTS = 200
RAW_FETCH_REQUESTS = 500
JAVA_CLIENTS = Path(__file__).parent / "java" / "JavaClients.java"
Run = dict[str, float]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records-1kib", type=int, default=300_000)
    parser.add_argument("--records-100b", type=int, default=300_000)
    parser.add_argument("--records-java", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--connections", type=int, default=600)
    parser.add_argument("--flood", type=int, default=1000)
    parser.add_argument("--json", default="benchmarks/results/security.json")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"which to run, of {', '.join(PARTS)}"
    )
    arguments = parser.parse_args()
    parts = set(arguments.parts.split(","))
    started = time.perf_counter()
    machine = _machine()
    spawn = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="bench-security-") as directory,
        running_secure(Path(directory)) as (broker, secure),
        ProcessPoolExecutor(CLIENT_PROCESSES, mp_context=spawn) as pool,
    ):
        for warmed in [pool.submit(ready) for _ in range(CLIENT_PROCESSES)]:
            warmed.result()
        idle_rss_mb = broker.rss_bytes() / 1e6
        sizes = {1024: arguments.records_1kib, 100: arguments.records_100b}
        throughput = (
            measure_throughput(broker, secure, sizes, arguments.repeats, arguments.records_java)
            if "throughput" in parts
            else {}
        )
        connections = (
            measure_connections(broker, secure, pool, arguments.connections)
            if "connections" in parts
            else {}
        )
        floods = {
            name: measure_flood(broker, secure, pool, name, arguments.flood)
            for name in (FLOODS if "floods" in parts else ())
        }
        broker_errors = (Path(directory) / "broker.err").read_text()
    results: dict[str, Any] = {
        "command": "python -m benchmarks.security",
        "arguments": vars(arguments),
        "machine": machine,
        "finished": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "total_s": time.perf_counter() - started,
        "idle_rss_mb": idle_rss_mb,
        "targets": {
            "throughput": f"SASL_SSL >= {THROUGHPUT_TARGET}x PLAINTEXT records/s",
            "flood": f"producer during the flood >= {FLOOD_TARGET}x without",
        },
        "throughput": throughput,
        "connections": connections,
        "floods": floods,
        "broker_stderr": broker_errors[-2000:],
    }
    Path(arguments.json).write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))


# --- 1. throughput -----------------------------------------------------------------------


def measure_throughput(
    broker: RunningBroker,
    secure: SecureBroker,
    sizes: dict[int, int],
    repeats: int,
    java_records: int,
) -> dict[str, Any]:
    """Per record size and phase: each listener's runs, medians and SASL_SSL/PLAINTEXT."""
    runs: dict[str, dict[str, list[Run]]] = {}
    java = java_client(java_records)
    for repeat in range(repeats):
        throughput_repeat(broker, secure, sizes, repeat, java, runs)
    return compare_runs(runs)


def java_client(records: int) -> tuple[str, int] | None:
    """(the Java client's classpath, its records) when it can run and is asked for."""
    classpath = _java_classpath() if records > 0 else None
    if records > 0 and classpath is None:
        print(f"no Java client shapes: {_java_unavailable()}", flush=True)
    return None if classpath is None else (classpath, records)


def throughput_repeat(
    broker: RunningBroker,
    secure: SecureBroker,
    sizes: dict[int, int],
    repeat: int,
    java: tuple[str, int] | None,
    runs: dict[str, dict[str, list[Run]]],
) -> None:
    """One repeat of every throughput shape, the listener that goes first alternating with
    ``repeat``; adds each run to ``runs`` (shape, then listener)."""
    first_plain = repeat % 2 == 0
    for size, count in sizes.items():
        for protocol in PROTOCOLS if first_plain else PROTOCOLS[::-1]:
            for phase, run in _produce_and_consume(broker, secure, protocol, size, count):
                _keep(runs, f"{phase} {_size(size)}", protocol, run, broker.name, repeat)
    for protocol in PROTOCOLS if first_plain else PROTOCOLS[::-1]:
        rounds = _raw_rounds(broker, secure, protocol)
        if java is not None:
            rounds += _java_rounds(broker, secure, protocol, *java)
        for shape, run in rounds:
            _keep(runs, shape, protocol, run, broker.name, repeat)


def _keep(
    runs: dict[str, dict[str, list[Run]]],
    shape: str,
    protocol: str,
    run: Run,
    broker: str,
    repeat: int,
) -> None:
    runs.setdefault(shape, {}).setdefault(protocol, []).append(run)
    cores = (
        f" (broker {run['broker_cores']:.2f} cores, busiest client thread "
        f"{run['busiest_client_thread_cores']:.2f})"
        if "broker_cores" in run
        else ""
    )
    print(f"{broker} repeat {repeat + 1} {shape} {protocol}: "
          f"{run['records_per_s']:,.0f} records/s{cores}", flush=True)  # fmt: skip


def compare_runs(runs: dict[str, dict[str, list[Run]]]) -> dict[str, Any]:
    return {shape: _compare(by_protocol) for shape, by_protocol in runs.items()}


def _raw_rounds(
    broker: RunningBroker, secure: SecureBroker, protocol: str
) -> list[tuple[str, Run]]:
    """The broker's side alone: one connection of kshim's own wire client (its TLS is
    Python's ssl, one call per request) sends the same Produce request of 1,000 1 KiB
    records RAW_PRODUCE_REQUESTS times, five in flight, then Fetches the first MiB of the
    partition RAW_FETCH_REQUESTS times, one at a time as a consumer does. Neither client
    sets the rate as librdkafka does (its TLS writes go out in small pieces, a loop of its
    broker thread each)."""
    topic = f"raw-{protocol.lower()}-{time.time_ns()}"
    create_topic(broker, topic)
    security = raw_security(secure, protocol)
    address = secure.plaintext if protocol == "PLAINTEXT" else secure.sasl_ssl
    produce = produce_frame(topic, RAW_RECORDS, 1024)
    with sampled(broker) as producing:
        produced = _raw(broker, address, security, produce, RAW_PRODUCE_REQUESTS, 5)
    with sampled(broker) as fetching:
        fetched = _raw(broker, address, security, raw_fetch(topic), RAW_FETCH_REQUESTS, 1)
    produced["peak_rss_mb"] = producing.peak_rss_bytes / 1e6
    fetched["peak_rss_mb"] = fetching.peak_rss_bytes / 1e6
    return [("produce 1 KiB, raw client", produced), ("consume 1 KiB, raw client", fetched)]


def _java_rounds(
    broker: RunningBroker, secure: SecureBroker, protocol: str, classpath: str, count: int
) -> list[tuple[str, Run]]:
    """The Java client (kafka-clients 3.x, the one Spark's connector and Kafka Connect
    use): benchmarks/java/JavaClients.java produces ``count`` 1 KiB records (acks=all,
    idempotent, linger.ms=5, its other defaults: batch.size 16 KiB) and reads them back."""
    topic = f"java-{protocol.lower()}-{time.time_ns()}"
    create_topic(broker, topic)
    address = secure.plaintext if protocol == "PLAINTEXT" else secure.sasl_ssl
    command = ["java", "-cp", classpath, str(JAVA_CLIENTS), address, protocol, secure.ca]
    command += [SCRAM_USER, SCRAM_PASSWORD, str(count), "1024", topic]
    with sampled(broker) as usage:
        ran = subprocess.run(
            command, check=False, capture_output=True, text=True, timeout=TIMEOUT_S * 10
        )
    if ran.returncode != 0:
        raise RuntimeError(f"the Java client failed: {ran.stderr[-2000:]}")
    rates = dict(line.split() for line in ran.stdout.split("\n") if line.strip())
    found = []
    for phase in ("produce", "consume"):
        # Only the program knows when each phase ran: no broker CPU a record for these.
        run = _run(count, count / float(rates[phase]), float("nan"), float("nan"))
        run["peak_rss_mb"] = usage.peak_rss_bytes / 1e6
        found.append((f"{phase} 1 KiB, Java client", run))
    return found


def _java_classpath() -> str | None:
    """kafka-clients from Spark's connector jars (as the Spark tests take them) and pyspark's
    slf4j-api, when those and a Java that can run a source file are here."""
    import pyspark  # only to find its jars: about 0.3 s to import

    jars = connector_jars()
    slf4j = sorted(glob.glob(str(Path(pyspark.__file__).parent / "jars" / "slf4j-api-*.jar")))
    if jars is None or not slf4j or shutil.which("java") is None:
        return None
    clients = [jar for jar in jars if Path(jar).name.startswith("kafka-clients-")]
    return os.pathsep.join([*clients, slf4j[-1]])


def _java_unavailable() -> str:
    if shutil.which("java") is None:
        return "no java on PATH"
    return connector_unavailable_reason() or "pyspark's slf4j-api jar not found"


def _raw(
    broker: RunningBroker,
    address: str,
    security: ClientSecurity | None,
    frame: bytes,
    requests: int,
    depth: int,
) -> Run:
    with connect(address, TIMEOUT_S, security=security, max_response_bytes=8 << 20) as conn:
        cpu_before = broker.cpu_seconds()
        seconds = pipelined(conn, frame, requests, depth)
        records = requests * RAW_RECORDS
        return _run(records, seconds, broker.cpu_seconds() - cpu_before, float("nan"))


def _produce_and_consume(
    broker: RunningBroker, secure: SecureBroker, protocol: str, size: int, count: int
) -> list[tuple[str, Run]]:
    """One produce and one consume run of ``count`` records. Each client connects, logs in
    and reaches its partition before its clock starts (the logins' own cost is part 2):
    the rates are what a producer or consumer already running gets; how long the first
    record took is kept beside them."""
    topic = f"bench-{protocol.lower()}-{size}-{time.time_ns()}"
    create_topic(broker, topic)
    settings = librdkafka_settings(secure, protocol)
    with sampled(broker) as producing:
        produced = _produce(broker, topic, count, size, settings)
    with sampled(broker) as consuming:
        consumed = _consume(broker, topic, count + 1, settings)
    produced["peak_rss_mb"] = producing.peak_rss_bytes / 1e6
    consumed["peak_rss_mb"] = consuming.peak_rss_bytes / 1e6
    return [("produce", produced), ("consume", consumed)]


def _produce(
    broker: RunningBroker, topic: str, count: int, size: int, settings: dict[str, Any]
) -> Run:
    """One record sent and acknowledged (connection, login, producer id), then the clock
    runs over ``count`` more, acks=all, idempotent, linger.ms=5."""
    producer = Producer({**settings, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    payload = b"x" * size
    started = time.perf_counter()
    send(producer, topic, payload)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("the first record was not acknowledged")
    first_ms = (time.perf_counter() - started) * 1000
    threads = ThreadUsage()
    threads.start()
    cpu_before, started = broker.cpu_seconds(), time.perf_counter()
    for _ in range(count):
        send(producer, topic, payload)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("records not acknowledged")
    seconds = time.perf_counter() - started
    threads.stop()
    return _run(count, seconds, broker.cpu_seconds() - cpu_before, first_ms, threads)


def _consume(broker: RunningBroker, topic: str, count: int, settings: dict[str, Any]) -> Run:
    """Reads ``count`` records from offset 0: the clock starts once the first batch is in
    (connection, login, first fetch) and runs over the records after it.

    librdkafka stops fetching for fetch.queue.backoff.ms (1 s by default) whenever its local
    queue holds more than queued.max.messages.kbytes: a consumer whose broker answers faster
    than its own loop takes records fills the queue and then waits out the second. Over
    PLAINTEXT that made the rate swing between about 150,000 and 600,000 records/s from run
    to run with neither side busy, and SASL_SSL look faster; with the backoff at 0 both
    listeners are read as fast as this loop takes records."""
    consumer = Consumer(
        {**settings, "group.id": "bench", "enable.auto.commit": False,
         "isolation.level": "read_uncommitted", "fetch.queue.backoff.ms": 0}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.perf_counter() + TIMEOUT_S
    started = time.perf_counter()
    first = 0
    while not first and time.perf_counter() < deadline:
        first = len(consumer.consume(10_000, 1.0))
    first_ms = (time.perf_counter() - started) * 1000
    received = first
    threads = ThreadUsage()
    threads.start()
    cpu_before, started = broker.cpu_seconds(), time.perf_counter()
    while received < count and time.perf_counter() < deadline:
        # No more than are left: consume() waits out its timeout for a batch it cannot fill.
        received += len(consumer.consume(min(10_000, count - received), 1.0))
    seconds = time.perf_counter() - started
    cpu = broker.cpu_seconds() - cpu_before
    threads.stop()
    consumer.close()
    if received < count:
        raise RuntimeError(f"read {received} of {count} records")
    return _run(received - first, seconds, cpu, first_ms, threads)


def _run(
    records: int,
    seconds: float,
    cpu_seconds: float,
    first_ms: float,
    threads: ThreadUsage | None = None,
) -> Run:
    """One run's figures; with the client's ``threads``, the broker's and the client's
    share of a core beside (the busiest client thread's too: at 1.0 it paced the run)."""
    run = {
        "records": records,
        "records_per_s": records / seconds,
        "broker_cpu_us_per_record": cpu_seconds / records * 1e6,
        "first_record_ms": first_ms,
    }
    if threads is not None:
        run["broker_cores"] = cpu_seconds / seconds
        run["client_cores"] = threads.total_cores()
        run["busiest_client_thread_cores"] = threads.busiest()[1]
    return run


def _compare(by_protocol: dict[str, list[Run]]) -> dict[str, Any]:
    medians = {
        protocol: {name: statistics.median(run[name] for run in runs) for name in runs[0]}
        for protocol, runs in by_protocol.items()
    }
    plain, secure = by_protocol["PLAINTEXT"], by_protocol["SASL_SSL"]
    paired = [s["records_per_s"] / p["records_per_s"] for s, p in zip(secure, plain, strict=True)]
    ratio = medians["SASL_SSL"]["records_per_s"] / medians["PLAINTEXT"]["records_per_s"]
    return {
        "median": medians,
        "ratio_of_medians": ratio,
        "paired_ratios": paired,
        "verdict": _verdict(ratio, paired, THROUGHPUT_TARGET),
        "runs": by_protocol,
    }


# --- 2. connections ----------------------------------------------------------------------


def measure_connections(
    broker: RunningBroker, secure: SecureBroker, pool: ProcessPoolExecutor, count: int
) -> dict[str, dict[str, float]]:
    """Per kind: connections per second, and broker and client CPU per connection."""
    found = {}
    each = count // CLIENT_PROCESSES
    for kind in CONNECTION_KINDS:
        with sampled(broker) as usage:
            started = time.perf_counter()
            workers = [
                pool.submit(connection_worker, secure, kind, each) for _ in range(CLIENT_PROCESSES)
            ]
            client_cpu = sum(worker.result()["client_cpu_s"] for worker in workers)
            seconds = time.perf_counter() - started
        total = each * CLIENT_PROCESSES
        found[kind] = {
            "connections": total,
            "per_s": total / seconds,
            "broker_cpu_ms_each": usage.cpu_seconds / total * 1000,
            "client_cpu_ms_each": client_cpu / total * 1000,
            "peak_rss_mb": usage.peak_rss_bytes / 1e6,
        }
        print(
            f"{kind}: {found[kind]['per_s']:,.0f}/s, broker CPU "
            f"{found[kind]['broker_cpu_ms_each']:.2f} ms each",
            flush=True,
        )
    return found


# --- 3. a wrong-password flood beside an authenticated producer --------------------------


def measure_flood(
    broker: RunningBroker,
    secure: SecureBroker,
    pool: ProcessPoolExecutor,
    flood: str,
    attempts: int,
) -> dict[str, Any]:
    """The producer's records/s before, during and after ``attempts`` wrong logins."""
    topic = f"flood-{time.time_ns()}"
    create_topic(broker, topic)
    producer = Producer(
        {
            **librdkafka_settings(secure, "SASL_SSL"),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    _produce_for(producer, topic, lambda: False)  # connected and authenticated before
    before = _window(broker, secure, producer, topic, _for_seconds(WINDOW_S))
    per_worker = attempts // CLIENT_PROCESSES
    concurrency = FLOOD_CONCURRENCY // CLIENT_PROCESSES
    workers = [
        pool.submit(flood_worker, secure, flood, per_worker, concurrency)
        for _ in range(CLIENT_PROCESSES)
    ]
    during = _window(broker, secure, producer, topic, lambda: not all(w.done() for w in workers))
    ends = [worker.result() for worker in workers]
    after = _window(broker, secure, producer, topic, _for_seconds(WINDOW_S))
    producer.flush(TIMEOUT_S)
    outcomes: dict[str, int] = {}
    for end in ends:
        for outcome, times in end["outcomes"].items():
            outcomes[outcome] = outcomes.get(outcome, 0) + times
    without = (before["records_per_s"] + after["records_per_s"]) / 2
    ratio = during["records_per_s"] / without
    made = per_worker * CLIENT_PROCESSES
    # The producer's share of the broker's CPU during the flood, at its cost per record
    # without one; the rest is the flood's.
    per_record = (before["broker_cpu_s"] + after["broker_cpu_s"]) / (
        before["records"] + after["records"]
    )
    flood_cpu = during["broker_cpu_s"] - per_record * during["records"]
    result = {
        "attempts": made,
        "outcomes": outcomes,
        "attempts_per_s": made / during["seconds"],
        "attacker_cpu_ms_each": sum(end["client_cpu_s"] for end in ends) / made * 1000,
        "broker_cpu_ms_per_attempt": flood_cpu / made * 1000,
        "before": before,
        "during": during,
        "after": after,
        "ratio": ratio,
        "paired_ratios": [
            during["records_per_s"] / before["records_per_s"],
            during["records_per_s"] / after["records_per_s"],
        ],
    }
    result["verdict"] = _verdict(ratio, result["paired_ratios"], FLOOD_TARGET)
    print(
        f"flood {flood}: producer {during['records_per_s']:,.0f} records/s during, "
        f"{without:,.0f} without ({ratio:.2f}x); {outcomes}",
        flush=True,
    )
    return result


def _for_seconds(seconds: float) -> Callable[[], bool]:
    deadline = time.perf_counter() + seconds
    return lambda: time.perf_counter() < deadline


class _Probe:
    """ApiVersions on a PLAINTEXT connection every PROBE_INTERVAL_S, in a thread, each
    answer's time kept: how long the broker's event loop keeps a ready request waiting."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)
        self.answers_ms: list[float] = []

    def __enter__(self) -> _Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with connect(self._address, TIMEOUT_S) as conn:
            while not self._stop.wait(PROBE_INTERVAL_S):
                started = time.perf_counter()
                conn.send(API_VERSIONS_V0)
                conn.read_frame()
                self.answers_ms.append((time.perf_counter() - started) * 1000)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.answers_ms) or [float("nan")]
        return {
            "probe_p50_ms": ordered[len(ordered) // 2],
            "probe_p99_ms": ordered[min(int(len(ordered) * 0.99), len(ordered) - 1)],
            "probe_max_ms": ordered[-1],
        }


def _window(
    broker: RunningBroker,
    secure: SecureBroker,
    producer: Producer,
    topic: str,
    going: Callable[[], bool],
) -> dict[str, float]:
    """Produces while ``going()``, then until every record is acknowledged: records/s over
    that time, the broker's and the producer's cores (CPU seconds a second), the broker's
    peak RSS and its answer times to the probe."""
    with sampled(broker) as usage, _Probe(secure.plaintext) as probe:
        started, client_cpu = time.perf_counter(), time.process_time()
        count = _produce_for(producer, topic, going)
        seconds = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
    return {
        **probe.summary(),
        "records": count,
        "seconds": seconds,
        "records_per_s": count / seconds,
        "broker_cpu_s": usage.cpu_seconds,
        "broker_cores": usage.cpu_seconds / seconds,
        # this process: the producer's Python loop and librdkafka's threads
        "producer_cores": client_cpu / seconds,
        "peak_rss_mb": usage.peak_rss_bytes / 1e6,
    }


def _produce_for(producer: Producer, topic: str, going: Callable[[], bool]) -> int:
    """Sends 1 KiB records while ``going()`` (checked every 100 records, at least one
    record), flushes, and returns how many were sent; raises if any is not acknowledged."""
    payload = b"x" * FLOOD_RECORD_BYTES
    count = 0
    while True:
        for _ in range(100):
            send(producer, topic, payload)
        count += 100
        if not going():
            break
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("records not acknowledged")
    return count


# --- the report --------------------------------------------------------------------------


def _verdict(ratio: float, paired: list[float], target: float) -> str:
    """'met' when the ratio of the medians and every pair meet the target, 'missed' when
    none does, else 'within noise'."""
    if ratio >= target and min(paired) >= target:
        return "met"
    if ratio < target and max(paired) < target:
        return "missed"
    return "within noise"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0f}"


def _us(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _size(size: int) -> str:
    return "1 KiB" if size == 1024 else f"{size} B"


def _machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_before": os.getloadavg()[0],
    }


def render(results: dict[str, Any]) -> str:
    """Three Markdown tables: throughput by listener, connections, floods."""
    lines = [
        "| shape | PLAINTEXT records/s | SASL_SSL records/s | SASL_SSL/PLAINTEXT (per repeat)"
        " | broker CPU µs/record PLAINTEXT, SASL_SSL | first record ms PLAINTEXT, SASL_SSL"
        " | peak RSS MB | result (>= 0.7x) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shape, found in results["throughput"].items():
        plain, secure = found["median"]["PLAINTEXT"], found["median"]["SASL_SSL"]
        paired = ", ".join(f"{ratio:.2f}" for ratio in found["paired_ratios"])
        lines.append(
            f"| {shape} | {plain['records_per_s']:,.0f} | {secure['records_per_s']:,.0f} | "
            f"{found['ratio_of_medians']:.2f}x ({paired}) | "
            f"{_us(plain['broker_cpu_us_per_record'])}, {_us(secure['broker_cpu_us_per_record'])}"
            f" | {_ms(plain['first_record_ms'])}, {_ms(secure['first_record_ms'])}"
            f" | {max(plain['peak_rss_mb'], secure['peak_rss_mb']):.0f} | {found['verdict']} |"
        )
    lines += [
        "",
        "| connection | per second | broker CPU ms each | client CPU ms each |",
        "|---|---|---|---|",
    ]
    for kind, found in results["connections"].items():
        lines.append(
            f"| {kind} | {found['per_s']:,.0f} | {found['broker_cpu_ms_each']:.2f} | "
            f"{found['client_cpu_ms_each']:.2f} |"
        )
    lines += [
        "",
        "| flood (wrong passwords) | attempts/s | not let in | attacker CPU ms each | broker CPU"
        " ms each (est.) | producer records/s before, during, after | during/without |"
        " ApiVersions answer p99 (max) ms before, during, after | peak RSS MB before, during,"
        " after | result (>= 0.9x) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for flood, found in results["floods"].items():
        refused = sum(n for outcome, n in found["outcomes"].items() if outcome != "accepted")
        windows = [found[name] for name in ("before", "during", "after")]
        rates = ", ".join(f"{window['records_per_s']:,.0f}" for window in windows)
        peaks = ", ".join(f"{window['peak_rss_mb']:.0f}" for window in windows)
        probes = ", ".join(
            f"{window['probe_p99_ms']:.1f} ({window['probe_max_ms']:.0f})" for window in windows
        )
        lines.append(
            f"| {flood} | {found['attempts_per_s']:,.0f} | {refused}/{found['attempts']} | "
            f"{found['attacker_cpu_ms_each']:.1f} | {found['broker_cpu_ms_per_attempt']:.1f} | "
            f"{rates} | {found['ratio']:.2f}x | {probes} | {peaks} | {found['verdict']} |"
        )
    lines.append(f"\nidle RSS {results['idle_rss_mb']:.1f} MB; {results['total_s']:.0f} s in all")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
