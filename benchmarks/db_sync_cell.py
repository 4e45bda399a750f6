"""One cell of the database-synchronisation benchmark (benchmarks/db_sync.py): a source, the
capture, one apply (Spark's query or the plain consumer) into one destination, one rate.

Clocks are wall-clock seconds (``time.time``), because a change's broker timestamp (the
capture producer's CreateTime) is one. The destination is polled every ``POLL_S`` for the
next offset the apply committed (sink.py's state row, written in the same transaction as
the rows): a record is visible from the first poll that sees the state past it.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from spark_examples.apply.consumer import consume_and_apply
from spark_examples.apply.job import ApplyOptions, apply_error_message, start_apply
from spark_examples.apply.sink import ensure_state_table, next_offset
from spark_examples.capture.broker import ensure_topic
from spark_examples.databases import open_database
from spark_examples.testing import (
    CaptureProcess,
    Workload,
    capture_drained,
    topic_end_offset,
)

POLL_S = 0.02
TIMEOUT_S = 600.0
# Spark's trigger for the cells: short, as a job meant to keep lag low would set it.
TRIGGER_INTERVAL = "200 milliseconds"


@dataclass(frozen=True, slots=True)
class Cell:
    """What one measurement runs: destination engine, apply kind, offered change rate."""

    engine: str  # sqlite | postgresql | duckdb
    sink: str  # spark | consumer
    rate: int | None  # changes/s the source workload offers; None: a filled log, full speed
    # Full speed only: the capture ships the whole log first, then the apply starts on the
    # backlog, so each runs alone at its own top speed (their ratio: can the apply keep up).
    backlog: bool = False
    # A backlog cell run first, on a JVM that has not yet compiled the Spark job's read path
    # (db_sync.py: the cells after it are measured warm).
    cold: bool = False

    @property
    def name(self) -> str:
        if self.backlog:
            return "cold-backlog" if self.cold else "backlog"
        return str(self.rate or "full")


class Poller(threading.Thread):
    """Samples (time, next offset) of the destination whenever the offset moves."""

    def __init__(self, dest: str, topic: str) -> None:
        super().__init__(daemon=True, name="db-sync-poller")
        self.dest, self.topic = dest, topic
        self.samples: list[tuple[float, int]] = [(time.time(), 0)]
        self.stop_event = threading.Event()

    def run(self) -> None:
        database = open_database(self.dest)
        try:
            while not self.stop_event.wait(POLL_S):
                offset = next_offset(database, self.topic, 0)
                if offset != self.samples[-1][1]:
                    self.samples.append((time.time(), offset))
        finally:
            database.close()

    def reached(self) -> int:
        return self.samples[-1][1]


class TimedWorkload(threading.Thread):
    """``changes`` random changes at ``per_second``, noting (commit time, changes so far)
    after each tenth of a second's worth."""

    def __init__(self, source: str, changes: int, per_second: int) -> None:
        super().__init__(daemon=True, name="db-sync-workload")
        self.source, self.changes, self.per_second = source, changes, per_second
        self.commits: list[tuple[float, int]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        database = open_database(self.source)
        try:
            workload, done, chunk = Workload(database, seed=11), 0, max(1, self.per_second // 10)
            started = time.time()
            while done < self.changes:
                step = min(chunk, self.changes - done)
                workload.run(step)
                done += step
                self.commits.append((time.time(), done))
                time.sleep(max(0.0, started + done / self.per_second - time.time()))
        except BaseException as error:
            self.error = error
        finally:
            database.close()


@dataclass
class Apply:
    """A running apply of either kind; ``stop`` ends it and raises what stopped it early."""

    stop: Callable[[], None]
    alive: Callable[[], bool]
    failure: Callable[[], str | None]
    errors: list[BaseException] = field(default_factory=list)


def start_spark(spark: Any, bootstrap: str, topic: str, dest: str, checkpoint: str) -> Apply:
    options = ApplyOptions(bootstrap, topic, dest, checkpoint, trigger_interval=TRIGGER_INTERVAL)
    query = start_apply(spark, options)
    deadline = time.monotonic() + 300
    while query.lastProgress is None:  # idle and warm before the clock starts
        if time.monotonic() > deadline or not query.isActive:
            raise RuntimeError(f"apply query did not start: {apply_error_message(query)}")
        time.sleep(0.1)
    return Apply(query.stop, lambda: bool(query.isActive), lambda: apply_error_message(query))


def start_consumer(bootstrap: str, topic: str, dest: str) -> Apply:
    database = open_database(dest)
    try:
        ensure_state_table(database)
    finally:
        database.close()
    stop, errors = threading.Event(), []

    def run() -> None:
        try:
            consume_and_apply(bootstrap, topic, dest, stop)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True, name="db-sync-consumer")
    thread.start()

    def end() -> None:
        stop.set()
        thread.join(60)

    return Apply(end, thread.is_alive, lambda: repr(errors[0]) if errors else None, errors)


def data_records(bootstrap: str, topic: str) -> list[tuple[int, float]]:
    """(offset, broker timestamp in seconds) of every committed change record, in order;
    schema records are left out (they are not changes of the source)."""
    end = topic_end_offset(bootstrap, topic)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "db-sync-read",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    found: list[tuple[int, float]] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(10_000, timeout=1.0)
            for message in messages:
                offset, key = message.offset(), message.key() or b""
                if message.error() is None and offset is not None and b'"schema"' not in key:
                    found.append((offset, message.timestamp()[1] / 1000))
            if messages and (messages[-1].offset() or 0) >= end - 2:
                break  # the rest are transaction markers
    finally:
        consumer.close()
    return found


def run_cell(
    cell: Cell, work: Path, bootstrap: str, spark: Any, source: str, dest: str, changes: int
) -> dict[str, Any]:
    """Runs ``cell`` on the (filled or empty) ``source``; returns its figures. The capture
    runs in a process of its own, as it would beside an application and the apply job."""
    topic = f"bench-{cell.engine}-{cell.sink}-{cell.name}"
    ensure_topic(bootstrap, topic)
    capture = CaptureProcess(source, bootstrap, topic, work / f"capture-{topic}.log")
    workload = None if cell.rate is None else TimedWorkload(source, changes, cell.rate)
    if cell.backlog and capture.start(once=True).wait(TIMEOUT_S) != 0:
        raise RuntimeError(f"capture --once failed: see {capture.log_path}")
    poller = Poller(dest, topic)
    if cell.sink == "spark":
        apply = start_spark(spark, bootstrap, topic, dest, str(work / f"checkpoint-{topic}"))
    else:
        apply = start_consumer(bootstrap, topic, dest)
    poller.start()
    try:
        if workload is not None:
            capture.start()
            workload.start()
            workload.join(TIMEOUT_S)
            if workload.error is not None:
                raise RuntimeError(f"workload failed: {workload.error!r}")
            _wait(lambda: capture_drained(source, topic), apply, "capture drained")
        elif not cell.backlog and capture.start(once=True).wait(TIMEOUT_S) != 0:
            raise RuntimeError(f"capture --once failed: see {capture.log_path}")
        target = topic_end_offset(bootstrap, topic) - 1  # past the last commit marker
        _wait(lambda: poller.reached() >= target, apply, "apply caught up")
    finally:
        capture.stop()
        apply.stop()
        poller.stop_event.set()
        poller.join(10)
    return _figures(cell, changes, workload, poller, bootstrap, topic)


def _wait(condition: Callable[[], bool], apply: Apply, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if not apply.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{what} not reached: {apply.failure()}")
        time.sleep(POLL_S)


def _figures(
    cell: Cell,
    changes: int,
    workload: TimedWorkload | None,
    poller: Poller,
    bootstrap: str,
    topic: str,
) -> dict[str, Any]:
    records = data_records(bootstrap, topic)
    if len(records) != changes:
        raise RuntimeError(f"{len(records)} change records in {topic}, expected {changes}")
    visible = visible_times([offset for offset, _ in records], poller.samples)
    appended = [timestamp for _, timestamp in records]
    # A filled log has no commit times that mean anything: the lag runs from the broker
    # append (the capture producer's CreateTime), the apply's own part.
    committed = appended if workload is None else commit_times(changes, workload.commits)
    lags = sorted(seen - at for seen, at in zip(visible, committed, strict=True))
    # Records after the first instant, over the span from it to the last: the first
    # instant's records (a batch committed at once) arrived before the span began.
    capture_per_s = _rate(appended)
    apply_per_s = _rate(visible)
    return {
        "engine": cell.engine,
        "sink": cell.sink,
        "rate": cell.name,
        "changes": changes,
        "lag_from": _lag_from(cell),
        "source_per_s": None if workload is None else changes / _span(workload.commits),
        "capture_per_s": capture_per_s,
        "apply_per_s": apply_per_s,
        "apply_over_capture": apply_per_s / capture_per_s
        if apply_per_s and capture_per_s
        else None,
        # From the first change committed (full speed: appended) to the last row visible.
        "end_to_end_per_s": changes / (max(visible) - min(committed)),
        "end_to_end_seconds": max(visible) - min(committed),
        "lag_p50_s": percentile(lags, 0.50),
        "lag_p99_s": percentile(lags, 0.99),
        "lag_max_s": lags[-1],
    }


def _rate(times: list[float]) -> float | None:
    first, span = min(times), max(times) - min(times)
    return sum(1 for at in times if at > first) / span if span > 0 else None


def _lag_from(cell: Cell) -> str:
    if cell.backlog:
        return "broker append (the backlog's wait included)"
    return "broker append" if cell.rate is None else "source commit"


def _span(commits: list[tuple[float, int]]) -> float:
    return max(commits[-1][0] - commits[0][0], 1e-9)


def visible_times(offsets: list[int], samples: list[tuple[float, int]]) -> list[float]:
    """For each record offset, the first sample time at which the destination was past it."""
    reached = [offset for _, offset in samples]
    return [samples[bisect.bisect_right(reached, offset)][0] for offset in offsets]


def commit_times(changes: int, commits: list[tuple[float, int]]) -> list[float]:
    """Change i (in sequence order, which is commit order) -> the time of the first
    workload note whose count passed i."""
    counts = [count for _, count in commits]
    return [commits[bisect.bisect_right(counts, index)][0] for index in range(changes)]


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]
