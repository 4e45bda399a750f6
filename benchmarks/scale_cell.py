"""One cell of benchmarks.scale: one broker, N topics, every phase, on a fresh data dir.

A phase that raises is recorded as failed with its reason and the cell goes on (a later
phase that needs what it made fails in turn, with its own reason); one that does not
apply to a broker raises NotMeasured. Figures a failed phase had already taken are kept.
"""

from __future__ import annotations

import contextlib
import re
import signal
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.brokers import BASELINE, RunningBroker, Usage, running, sampled
from benchmarks.scale_records import (
    PRODUCER_CONFIG,
    Produced,
    latency_over,
    produce_round_robin,
    read_back,
)
from benchmarks.scale_requests import (
    create_topics,
    fsyncs_at_stop,
    metadata_latency,
    missing_topics,
    seconds_to_first_produce,
    topic_names,
    wait_until_served,
    wide_produce,
)
from kshim.testing import failure_lines

SAMPLE_INTERVAL_S = 0.25  # also counts the tree's fds: ~10 ms of this process per 20,000
WIDE_PARTITIONS = 1_000  # "one produce request that touches 1,000 partitions"
FIRST_PRODUCE_DEADLINE_S = 30.0
SERVED_TIMEOUT_S = 600.0  # until every topic has a leader: Kafka at 10,000 topics takes a while
SHOWN_FAILURES = 3
SHOWN_LOG_LINES = 5
LOG_LINE_CHARACTERS = 300
# Beyond kshim.testing's markers: brokers run at --log-level WARNING, so a warning is news.
ALSO_FAILURES = ("Too many open files", " WARNING ")
LOG_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")  # logging's asctime


@dataclass(frozen=True)
class Plan:
    topic_counts: tuple[int, ...]
    records: int
    repeats: int
    latency_s: float
    latency_rate: int
    metadata_requests: int
    wide_requests: int
    producer_overrides: tuple[tuple[str, str], ...] = ()  # librdkafka settings, over ours

    def producer_config(self) -> dict[str, object]:
        return {**PRODUCER_CONFIG, **dict(self.producer_overrides)}


class NotMeasured(Exception):
    """The phase does not apply to this broker (the message says why)."""


@dataclass
class Cell:
    metrics: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # phase -> reason
    not_measured: dict[str, str] = field(default_factory=dict)
    broker_log: list[str] = field(default_factory=list)  # distinct failure lines, counted

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        try:
            yield
        except NotMeasured as reason:
            self.not_measured[name] = str(reason)
        except Exception as error:  # one phase failing must not stop the cell or the run
            traceback.print_exc()
            self.failed[name] = f"{type(error).__name__}: {error}"

    def track(self, usage: Usage, prefix: str) -> None:
        """Keeps a sampled phase's peaks under ``prefix``, and the cell's over all phases."""
        rss_mb, fds = usage.peak_rss_bytes / 1e6, float(usage.peak_open_fds)
        self.metrics[f"{prefix}_peak_rss_mb"], self.metrics[f"{prefix}_peak_fds"] = rss_mb, fds
        self.metrics["peak_rss_mb"] = max(self.metrics.get("peak_rss_mb", 0.0), rss_mb)
        self.metrics["peak_fds"] = max(self.metrics.get("peak_fds", 0.0), fds)


class BrokerSession:
    """The broker's successive runs in one cell, on one data dir; each run's standard
    error goes to a file of its own, where kshim prints its fsync count as it stops."""

    def __init__(self, name: str, directory: Path) -> None:
        self.name = name
        self.directory = directory
        self.data_dir = str(directory / "data")
        self._stack: contextlib.ExitStack | None = None
        self._broker: RunningBroker | None = None
        self._stderr = directory / "none.stderr"
        self.last_exit_code: int | None = None

    @property
    def keeps_data(self) -> bool:
        """Whether a restart finds the data (kshim's log is on disk; Tansu's in memory,
        Kafka's in a container that a restart would replace)."""
        return self.name in ("kshim", BASELINE)

    @property
    def broker(self) -> RunningBroker:
        if self._broker is None:
            raise RuntimeError("the broker is not running (it failed to start earlier)")
        return self._broker

    def start(self, label: str) -> RunningBroker:
        stack = contextlib.ExitStack()
        self._stderr = self.directory / f"{label}.stderr"
        self._broker = stack.enter_context(
            running(self.name, data_dir=self.data_dir, stderr_path=self._stderr)
        )
        self._stack = stack
        return self._broker

    def stop(self) -> int | None:
        """Stops the broker with SIGTERM (SIGKILL if it is still running 30 s later);
        returns the fsyncs it printed (None: none)."""
        stack, broker, self._stack, self._broker = self._stack, self._broker, None, None
        if stack is None:
            return None
        stack.close()
        if broker is not None and broker.process is not None:
            self.last_exit_code = broker.process.returncode
        return fsyncs_at_stop(self._stderr)

    def fsyncs_of_run(self, fsyncs: int | None) -> int:
        """``fsyncs`` as printed at the last stop; raises NotMeasured, saying why, if none."""
        if fsyncs is not None:
            return fsyncs
        if self.last_exit_code == -signal.SIGKILL:
            raise NotMeasured("kshim did not stop within 30 s of SIGTERM, so printed no count")
        raise NotMeasured("this kshim printed no fsync count when it stopped")

    def restart(self, label: str) -> int | None:
        """A graceful stop and a new run on the same data; the fsyncs of the run stopped."""
        fsyncs = self.stop()
        self.start(label)
        return fsyncs

    def kill(self) -> None:
        self.broker.kill_tree()
        self.stop()


def measure_cell(name: str, count: int, plan: Plan, topic_configs: Mapping[str, str]) -> Cell:
    """Runs every phase for broker ``name`` with ``count`` topics; never raises."""
    cell = Cell()
    topics = topic_names(count)
    with tempfile.TemporaryDirectory(prefix=f"scale-{name}-{count}-") as directory:
        session = BrokerSession(name, Path(directory))
        try:
            with cell.phase("start"):
                cell.metrics["fresh_start_s"] = session.start("create").ready_s
            if "start" not in cell.failed:
                run_phases(session, cell, topics, plan, topic_configs)
        finally:
            with cell.phase("stop"):
                session.stop()
            cell.broker_log = failures_logged(Path(directory))
    return cell


def failures_logged(directory: Path) -> list[str]:
    """The distinct failure lines (kshim.testing's markers, warnings, descriptor exhaustion) in
    the standard error of every run of the cell, each with how often it came, timestamps
    taken off; the first SHOWN_LOG_LINES kinds."""
    counted: Counter[str] = Counter()
    for path in sorted(directory.glob("*.stderr")):
        lines = failure_lines(path.read_text(errors="replace"), also=ALSO_FAILURES)
        counted.update(LOG_TIMESTAMP.sub("", line)[:LOG_LINE_CHARACTERS] for line in lines)
    return [f"{count}x {line}" for line, count in list(counted.items())[:SHOWN_LOG_LINES]]


def run_phases(
    session: BrokerSession,
    cell: Cell,
    topics: list[str],
    plan: Plan,
    topic_configs: Mapping[str, str],
) -> None:
    with cell.phase("create"):
        create(session.broker, cell, topics, topic_configs)
    with cell.phase("metadata"):
        requests = plan.metadata_requests
        cell.metrics.update(metadata_latency(session.broker.bootstrap, topics, requests))
    produced = Produced()
    with cell.phase("produce"):
        produced = produce(session, cell, topics, plan)
    with cell.phase("fsyncs"):
        count_fsyncs(session, cell, produced)
    with cell.phase("wide_produce"):
        group_commit(session, cell, topics, plan.wide_requests)
    with cell.phase("read_back"):
        check_read_back(session.broker, cell, produced, "")
    with cell.phase("latency"):
        latency(session.broker, cell, topics, plan)
    with cell.phase("kill9"):
        restart_after_kill(session, cell)
    if "restart_after_kill_s" in cell.metrics:
        with cell.phase("first_produce_after_kill"):
            first_produce_after_kill(session.broker, cell, topics[0])
    with cell.phase("read_back_after_kill"):
        check_read_back(session.broker, cell, produced, "after_kill_")


def create(
    broker: RunningBroker, cell: Cell, topics: list[str], topic_configs: Mapping[str, str]
) -> None:
    started = time.perf_counter()
    failures = create_topics(broker.bootstrap, topics, topic_configs)
    cell.metrics["create_s"] = time.perf_counter() - started
    cell.metrics["served_after_create_s"] = wait_until_served(
        broker.bootstrap, topics, SERVED_TIMEOUT_S
    )
    cell.metrics["topics_created"] = len(topics) - len(failures)
    cell.metrics["fds_after_create"] = broker.open_fds()
    cell.metrics["rss_after_create_mb"] = broker.rss_bytes() / 1e6
    if failures:
        shown = list(failures.items())[:SHOWN_FAILURES]
        raise RuntimeError(f"{len(failures):,} of {len(topics):,} topics not created, e.g. {shown}")


def produce(session: BrokerSession, cell: Cell, topics: list[str], plan: Plan) -> Produced:
    """The produce phase, on a run of its own when the broker keeps its data (so that
    the fsyncs kshim prints at that run's stop are this phase's)."""
    if session.keeps_data:
        session.restart("produce")
        cell.metrics["restart_graceful_s"] = session.broker.ready_s
        cell.metrics["served_after_restart_s"] = wait_until_served(
            session.broker.bootstrap, topics, SERVED_TIMEOUT_S
        )
    else:
        cell.not_measured["restart_graceful"] = "no data kept across a restart"
    with sampled(session.broker, SAMPLE_INTERVAL_S, count_fds=True) as usage:
        produced = produce_round_robin(
            session.broker.bootstrap, topics, plan.records, plan.producer_config()
        )
    cell.track(usage, "produce")
    acknowledged = produced.acknowledged_count
    cell.metrics.update({
        "written": produced.written,
        "acknowledged": acknowledged,
        "delivery_failures": produced.failures,
        "produce_seconds": produced.seconds,
        "produce_records_per_s": acknowledged / produced.seconds,
        "produce_client_cores": produced.client_cpu_seconds / produced.seconds,
        "produce_busiest_client_thread_cores": produced.busiest_client_thread_cores,
        "produce_end_fds": session.broker.open_fds(),
    })  # fmt: skip
    if acknowledged:
        cpu_us = usage.cpu_seconds / acknowledged * 1e6
        cell.metrics["produce_broker_cpu_us_per_record"] = cpu_us
        cell.metrics["produce_broker_cores"] = usage.cpu_seconds / produced.seconds
    if produced.failures:  # recorded, not raised: the acknowledged records are still read back
        reason = f"{produced.failures:,} deliveries failed, first {produced.first_failure}"
        cell.failed["produce"] = reason
    return produced


def count_fsyncs(session: BrokerSession, cell: Cell, produced: Produced) -> None:
    """fsyncs/s of the produce phase: kshim's count from the produce run's stop."""
    if session.name == "kafka":
        raise NotMeasured("Kafka's fsyncs are not counted here")
    fsyncs = session.fsyncs_of_run(session.restart("wide_produce")) if session.keeps_data else 0
    if not produced.acknowledged:
        raise RuntimeError("no records were acknowledged in the produce phase")
    cell.metrics["fsyncs_produce"] = fsyncs
    cell.metrics["fsyncs_per_s"] = fsyncs / produced.seconds
    cell.metrics["fsyncs_per_1000_records"] = fsyncs / produced.acknowledged_count * 1000


def group_commit(session: BrokerSession, cell: Cell, topics: list[str], requests: int) -> None:
    """Produce requests each touching min(N, 1,000) partitions; for a broker that keeps
    its data, on a run of its own whose fsync count is divided by the requests."""
    wide = topics[:WIDE_PARTITIONS]
    with sampled(session.broker, SAMPLE_INTERVAL_S, count_fds=True) as usage:
        cell.metrics.update(wide_produce(session.broker.bootstrap, wide, requests))
    cell.track(usage, "wide_produce")
    cell.metrics["wide_produce_partitions"] = len(wide)
    with cell.phase("wide_fsyncs"):
        if session.name == "kafka":
            raise NotMeasured("Kafka's fsyncs are not counted here")
        fsyncs = session.fsyncs_of_run(session.restart("read_back")) if session.keeps_data else 0
        cell.metrics["wide_fsyncs_per_request"] = fsyncs / requests


def check_read_back(broker: RunningBroker, cell: Cell, produced: Produced, prefix: str) -> None:
    """Reads back every acknowledged record; topics the broker no longer knows are not
    read (their records count as lost)."""
    if not produced.acknowledged:
        raise RuntimeError("nothing was acknowledged to read back")
    topics = list(produced.acknowledged)
    deadline_s = max(60.0, produced.acknowledged_count * 0.0005 + len(topics) * 0.01)
    with sampled(broker, SAMPLE_INTERVAL_S, count_fds=True) as usage:
        absent = missing_topics(broker.bootstrap, topics)
        found = read_back(broker.bootstrap, produced.acknowledged, deadline_s, sorted(absent))
    cell.track(usage, f"{prefix}read_back")
    cell.metrics.update({f"{prefix}read_back": found.intact, f"{prefix}lost": found.lost,
                         f"{prefix}missing_topics": len(absent),
                         f"{prefix}read_back_s": found.seconds})  # fmt: skip
    if not found.finished:
        raise RuntimeError(f"not every partition read to its end within {deadline_s:g} s")


def latency(broker: RunningBroker, cell: Cell, topics: list[str], plan: Plan) -> None:
    with sampled(broker, SAMPLE_INTERVAL_S, count_fds=True) as usage:
        result = latency_over(broker.bootstrap, topics, plan.latency_rate, plan.latency_s)
    cell.track(usage, "latency")
    cell.metrics.update({"latency_p50_ms": result["p50_ms"], "latency_p99_ms": result["p99_ms"],
                         "latency_received": result["records"],
                         "latency_sent": result["sent"]})  # fmt: skip
    if result["records"] < result["sent"]:  # the percentiles are of those that arrived
        cell.failed["latency"] = (
            f"{result['records']:,.0f} of {result['sent']:,.0f} records arrived in time"
        )


def first_produce_after_kill(broker: RunningBroker, cell: Cell, topic: str) -> None:
    """Seconds from the restart's launch to the first acknowledged acks=all produce."""
    first = seconds_to_first_produce(broker.bootstrap, topic, FIRST_PRODUCE_DEADLINE_S)
    cell.metrics["first_produce_after_kill_s"] = cell.metrics["restart_after_kill_s"] + first


def restart_after_kill(session: BrokerSession, cell: Cell) -> None:
    """kill -9 of the whole tree, then a new run on the same data dir."""
    if session.name == "kafka":
        raise NotMeasured("Kafka is not killed and restarted here (its data directory is not kept)")
    session.kill()
    cell.metrics["restart_after_kill_s"] = session.start("after_kill").ready_s
