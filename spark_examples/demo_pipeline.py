"""The demo's pipeline (``python -m spark_examples.demo``, whose entry checks first that
this environment can run it): a broker, a SQLite source with capture triggers and random
activity, the capture process, Spark streaming into a SQLite and a DuckDB destination, a
third destination bootstrapped from ``shop.full`` half-way, then the check of every
destination against the source. Imports confluent-kafka, pyspark and DuckDB."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kshim.testing import BrokerProcess
from spark_examples.apply.job import ApplyOptions, apply_error_message, start_apply
from spark_examples.apply.pipelined import ApplyQuery
from spark_examples.capture.broker import ensure_topic
from spark_examples.capture.review import REVIEW_HOOK, REVIEW_HOOK_SETTING
from spark_examples.databases import open_database
from spark_examples.testing import (
    TABLE_NAMES,
    CaptureProcess,
    PacedWorkload,
    capture_drained,
    create_source_tables,
    registry_environment,
    topic_end_offset,
    wait_until,
)
from spark_examples.verify import compare_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOPIC = "shop"
CATCH_UP_TIMEOUT_S = 300.0
PROGRESS_INTERVAL_S = 3.0


def say(message: str) -> None:
    """Prints one progress line, timestamped, at once."""
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def query_position(query: ApplyQuery, topic: str) -> int:
    """The offset up to which the query has finished batches (-1 before the first)."""
    progress = query.lastProgress
    if not progress or not progress["sources"]:
        return -1
    offsets = _as_dict(progress["sources"][0]["endOffset"])
    return int((offsets or {}).get(topic, {}).get("0", -1))


def _as_dict(offsets: object) -> dict[str, dict[str, int]] | None:
    # Spark's JSON, which pyspark 4.0 hands over as str() of the parsed dict.
    if offsets is None or isinstance(offsets, dict):
        return offsets
    try:
        parsed = json.loads(str(offsets))
    except ValueError:
        parsed = ast.literal_eval(str(offsets))
    return parsed if isinstance(parsed, dict) else None


class Demo:
    """The processes and queries of one run, so that ``close`` can stop all of them."""

    def __init__(self, work: Path, operations: int, rate: int) -> None:
        self.work, self.operations, self.rate = work, operations, rate
        self.source = f"sqlite:///{work}/source.db"
        self.destinations = {
            f"sqlite:///{work}/dest.db": TOPIC,
            f"duckdb:///{work}/dest.duckdb": TOPIC,
        }
        self.late = f"sqlite:///{work}/late.db"
        self.broker = BrokerProcess(work / "broker", [f"{REVIEW_HOOK_SETTING}={REVIEW_HOOK}"])
        self.capture: CaptureProcess | None = None
        self.workload: PacedWorkload | None = None
        self.spark: SparkSession | None = None
        self.queries: dict[str, ApplyQuery] = {}

    def start(self) -> None:
        self.broker.start()
        say(f"broker on {self.broker.bootstrap}, data in {self.work / 'broker'}")
        source = open_database(self.source)
        try:
            create_source_tables(source)
        finally:
            source.close()
        say(f"source {self.source}: tables {', '.join(TABLE_NAMES)} with capture triggers")
        ensure_topic(self.broker.bootstrap, TOPIC)
        self.capture = CaptureProcess(
            self.source, self.broker.bootstrap, TOPIC, self.work / "capture.log"
        ).start()
        say(f"capture running (log {self.work / 'capture.log'})")
        from spark_examples.spark_session import kafka_spark_session

        say("starting Spark (local) ...")
        self.spark = kafka_spark_session("kshim-demo")
        for dest, topic in self.destinations.items():
            self._start_query(dest, topic)
        self.workload = PacedWorkload(self.source, self.operations, self.rate, seed=1)
        self.workload.start()
        say(f"activity: {self.operations} inserts/updates/deletes at about {self.rate}/s")

    def _start_query(self, dest: str, topic: str) -> None:
        assert self.spark is not None
        checkpoint = self.work / f"checkpoint-{len(self.queries)}"
        options = ApplyOptions(self.broker.bootstrap, topic, dest, str(checkpoint))
        self.queries[dest] = start_apply(self.spark, options, report=say)
        say(f"apply {topic} -> {dest} started")

    def run(self) -> None:
        workload = self.workload
        assert workload is not None
        while workload.is_alive():
            if self.late not in self.queries and workload.done >= workload.total // 2:
                self._bootstrap_late("activity goes on")
            self._check_queries()
            say(f"activity: {workload.done}/{workload.total} operations")
            workload.join(PROGRESS_INTERVAL_S)
        if workload.error is not None:
            raise RuntimeError(f"the activity generator failed: {workload.error!r}")
        if self.late not in self.queries:  # the activity was over before a progress check
            self._bootstrap_late("activity already over")
        say("activity stopped; waiting for capture to drain")
        wait_until(lambda: capture_drained(self.source, TOPIC), CATCH_UP_TIMEOUT_S, "capture")
        assert self.capture is not None
        self.capture.stop()
        self._wait_caught_up()

    def _bootstrap_late(self, situation: str) -> None:
        say(f"bootstrapping a new destination from {TOPIC}.full ({situation})")
        self.destinations[self.late] = TOPIC + ".full"
        self._start_query(self.late, TOPIC + ".full")

    def _check_queries(self) -> None:
        for dest, query in self.queries.items():
            if not query.isActive:
                raise RuntimeError(f"apply into {dest} stopped: {apply_error_message(query)}")

    def _wait_caught_up(self) -> None:
        end = topic_end_offset(self.broker.bootstrap, TOPIC)
        say(f"everything captured: {TOPIC} ends at offset {end}; waiting for the destinations")
        for dest, topic in self.destinations.items():
            query = self.queries[dest]

            def caught_up(query: ApplyQuery = query, topic: str = topic) -> bool:
                self._check_queries()
                return query_position(query, topic) >= end

            wait_until(caught_up, CATCH_UP_TIMEOUT_S, f"apply into {dest}")
            say(f"{dest} caught up ({topic} offset {end})")

    def verify(self) -> bool:
        self.close_queries()
        equal = True
        for dest in self.destinations:
            differences = compare_tables(self.source, dest, TABLE_NAMES)
            for line in differences:
                say(f"  {line}")
            say(f"verify {dest}: {'EQUAL' if not differences else 'NOT EQUAL'} to the source")
            equal = equal and not differences
        return equal

    def close_queries(self) -> None:
        for query in self.queries.values():
            with contextlib.suppress(Exception):
                query.stop()

    def close(self) -> None:
        """Stops whatever is still running, in reverse order of start."""
        if self.workload is not None:
            self.workload.stop_event.set()
            self.workload.join(30)
        self.close_queries()
        if self.spark is not None:
            self.spark.stop()
        if self.capture is not None:
            self.capture.stop()
        self.broker.stop()


@contextlib.contextmanager
def work_directory(given: str | None) -> Iterator[Path]:
    if given is not None:
        Path(given).mkdir(parents=True, exist_ok=True)
        yield Path(given).resolve()
        return
    directory = Path(tempfile.mkdtemp(prefix="kshim-demo-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_demo(operations: int, rate: int, work_dir: str | None, out: Callable[[str], None]) -> bool:
    """Runs the demo; returns True when every destination equals the source."""
    with work_directory(work_dir) as work:
        # The broker (review hook) and the capture find each other through this registry.
        os.environ.update(registry_environment(work))
        demo = Demo(work, operations, rate)
        started = time.monotonic()
        try:
            demo.start()
            demo.run()
            equal = demo.verify()
        finally:
            demo.close()
        out(
            f"{'ALL EQUAL' if equal else 'DIFFERENCES FOUND'} in {time.monotonic() - started:.0f} s"
        )
        return equal
