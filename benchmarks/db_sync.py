"""The VENUS capture and transmission measurements of database synchronisation on Spark
(docs/spark.md).

    python -m benchmarks.db_sync [--changes 100000] [--repeats 1]

Both on a kshim broker with the capture review hook, a SQLite source whose tables have the
capture triggers, and ``--changes`` random inserts, updates and deletes already in the
change-log table before the clock starts (VENUS measures capture of a filled log):

- capture: the time of ``capture --once`` (run_capture, in this process) to ship every
  logged change to the broker in Kafka transactions of 1,000 and record it in the source;
- transmission: a Spark apply query (stock connector, local[2], streaming into a SQLite
  destination) is already running and idle on an empty topic; the clock starts when the
  capture starts sending the same number of changes (a copy of the source) and stops when
  the destination's apply state shows the last change applied (polled every 20 ms).

Prints a table and writes benchmarks/results/db_sync.json. Needs Java and Spark's Kafka
connector (``python -m kshim.jvm fetch spark``, or Maven on PATH to fetch it at the start;
spark_examples/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kshim.testing import BrokerProcess
from spark_examples.apply.job import ApplyOptions, apply_error_message, start_apply
from spark_examples.apply.sink import next_offset
from spark_examples.capture import review
from spark_examples.capture.broker import ensure_topic
from spark_examples.capture.shipper import run_capture
from spark_examples.databases import open_database
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session
from spark_examples.testing import (
    TABLE_NAMES,
    Workload,
    create_source_tables,
    last_record_offset,
    registry_environment,
    wait_until,
)
from spark_examples.verify import compare_tables

RESULTS = Path(__file__).parent / "results"
REVIEW_HOOK = f"{review.REVIEW_HOOK_SETTING}={review.REVIEW_HOOK}"
POLL_S = 0.02
TIMEOUT_S = 900.0


def fill_source(path: Path, changes: int) -> float:
    """Creates the source with ``changes`` logged changes; returns the seconds it took."""
    database = open_database(f"sqlite:///{path}")
    started = time.monotonic()
    try:
        create_source_tables(database)
        Workload(database, seed=5).run(changes)
        database.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # one file, so a copy is whole
    finally:
        database.close()
    return time.monotonic() - started


def quiet_capture(source: Path, bootstrap: str, topic: str) -> int:
    """``capture --once`` without its per-batch progress lines."""
    with contextlib.redirect_stdout(io.StringIO()):
        return run_capture(f"sqlite:///{source}", TABLE_NAMES, bootstrap, topic, once=True)


def measure_capture(work: Path, bootstrap: str, source: Path, changes: int) -> dict[str, Any]:
    started = time.monotonic()
    captured = quiet_capture(source, bootstrap, "bench-capture")
    seconds = time.monotonic() - started
    if captured < changes:
        raise RuntimeError(f"captured {captured} of {changes} changes")
    return {"changes": captured, "seconds": seconds, "changes_per_s": captured / seconds}


def measure_transmission(
    work: Path, spark: Any, bootstrap: str, source: Path, changes: int
) -> dict[str, Any]:
    topic, dest = "bench-transmit", f"sqlite:///{work}/dest.db"
    ensure_topic(bootstrap, topic)
    options = ApplyOptions(bootstrap, topic, dest, str(work / "checkpoint"))
    query = start_apply(spark, options)
    try:
        # Idle and warm: Spark has planned batches on the empty topic before the clock starts.
        wait_until(lambda: query.lastProgress is not None, 300, "the apply query's first batch")
        first_send = time.monotonic()
        captured = quiet_capture(source, bootstrap, topic)
        captured_at = time.monotonic()
        target = last_record_offset(bootstrap, topic) + 1
        database = open_database(dest)
        try:
            while next_offset(database, topic, 0) < target:
                if not query.isActive or time.monotonic() - first_send > TIMEOUT_S:
                    raise RuntimeError(f"apply did not finish: {apply_error_message(query)}")
                time.sleep(POLL_S)
        finally:
            database.close()
        last_apply = time.monotonic()
    finally:
        query.stop()
    differences = compare_tables(f"sqlite:///{source}", dest, TABLE_NAMES)
    if differences:
        raise RuntimeError(f"destination differs from the source: {differences[:5]}")
    seconds = last_apply - first_send
    return {
        "changes": captured,
        "capture_seconds": captured_at - first_send,
        "seconds": seconds,
        "changes_per_s": captured / seconds,
        "destination_equal": True,
    }


def run_once(changes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kshim-db-sync-") as directory:
        work = Path(directory)
        os.environ.update(registry_environment(work))
        filled = fill_source(work / "source.db", changes)
        shutil.copy(work / "source.db", work / "source-transmit.db")
        broker = BrokerProcess(work / "broker", [REVIEW_HOOK]).start()
        spark = None
        try:
            capture = measure_capture(work, broker.bootstrap, work / "source.db", changes)
            spark = kafka_spark_session("kshim-bench-db-sync")
            transmission = measure_transmission(
                work, spark, broker.bootstrap, work / "source-transmit.db", changes
            )
        finally:
            if spark is not None:
                spark.stop()
            broker.stop()
        return {"fill_seconds": filled, "capture": capture, "transmission": transmission}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=1)
    arguments = parser.parse_args()
    reason = connector_unavailable_reason()
    if reason is not None:
        raise SystemExit(f"needs the Spark Kafka connector: {reason}")
    runs = [run_once(arguments.changes) for _ in range(arguments.repeats)]
    report = {
        "changes": arguments.changes,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "capture_seconds": statistics.median(run["capture"]["seconds"] for run in runs),
        "transmission_seconds": statistics.median(run["transmission"]["seconds"] for run in runs),
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "db_sync.json").write_text(json.dumps(report, indent=2))
    capture, transmission = report["capture_seconds"], report["transmission_seconds"]
    changes = arguments.changes
    print(f"\n{changes:,} inserts/updates/deletes, SQLite source, median of {len(runs)} run(s)\n")
    print("| measurement | seconds | changes/s |\n|---|---|---|")
    print(f"| capture (--once, log already filled) | {capture:.2f} | {changes / capture:,.0f} |")
    print(
        f"| first send to last apply (Spark into SQLite) | {transmission:.2f} |"
        f" {changes / transmission:,.0f} |"
    )


if __name__ == "__main__":
    main()
