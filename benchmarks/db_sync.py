"""Database synchronisation end to end: capture, apply and lag per destination (docs/spark.md).

    python -m benchmarks.db_sync [--full-changes 200000] [--paced-seconds 10]
        [--engines sqlite,postgresql,duckdb] [--sinks spark,consumer] [--rates full,5000,1000]

One kshim broker (with the capture review hook), one local[2] Spark session and, for
PostgreSQL, a throwaway cluster (spark_examples/postgres_cluster.py, the tests' own, run
with fsync=off: PostgreSQL's commits are not made durable). Each
cell (benchmarks/db_sync_cell.py) is one destination engine, one apply kind and one rate:

- apply: ``spark``, the apply job's streaming query (stock connector, trigger 200 ms,
  started idle on the cell's empty topic), or ``consumer``, the same sink fed by a
  plain Kafka consumer (spark_examples/apply/consumer.py);
- rate ``full`` runs two cells per destination and apply, both from a change log already
  holding ``--full-changes`` changes (200,000 by default: ten of the Spark job's
  micro-batches, so that a query's first batch and the span's edges weigh little):
  ``backlog``, where the capture ships the whole log (``--once``) before the apply starts
  on it, so each runs alone at its top speed; and
  ``full``, where the capture ships it while the apply runs, lag running from a change's
  broker append to its row being visible at the destination;
- ``cold-backlog``: with Spark among the apply kinds, the first engine's Spark backlog cell
  runs first of all, as the warm-up. The JVM compiles the job's read path (the Kafka
  consumer, the rows made into Arrow batches) in its first seconds with records: about
  three times the JVM's CPU per change of the same job run again in the same session
  (11.7 s against 2.8 to 4.3 s of JVM CPU for 200,000 changes into DuckDB, 2026-11-30).
  A job that applies changes for hours runs warm, so the cells after it are the ones that
  say whether it keeps up; this one is kept in the table, as measured;
- rate N: a workload commits N changes/s to the SQLite source for ``--paced-seconds``, the
  capture (a process of its own, polling every 200 ms) ships them; lag runs from the source
  commit to the row being visible at the destination.

Per cell: capture rate (change records over the span of their broker timestamps), apply
rate (rows over the span the destination took to show them), in both the records of the
span's first instant left out (they arrived before it began); apply/capture, which in the
``backlog`` cells answers whether the apply keeps up with the capture at full speed (1.0 or
more: it does); in the concurrent cells about 1.0 means it takes changes as fast as they
come and the lag stays flat, below 1.0 that the lag grows through the run. Also the
end-to-end rate (first change committed, or appended at full speed, to the last row
visible) and lag p50/p99. Every destination is checked equal to the source at the end.
Writes benchmarks/results/db_sync.json and .md
after each cell (a run cut short keeps its finished cells). Needs Java and Spark's Kafka
connector (``python -m kshim.jvm fetch spark``; spark_examples/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.db_sync_cell import Cell, run_cell
from benchmarks.db_sync_report import write_report
from kshim.testing import BrokerProcess
from spark_examples.capture import review
from spark_examples.databases import open_database
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session
from spark_examples.testing import (
    TABLE_NAMES,
    Workload,
    create_source_tables,
    registry_environment,
)
from spark_examples.verify import compare_tables

REVIEW_HOOK = f"{review.REVIEW_HOOK_SETTING}={review.REVIEW_HOOK}"


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


def empty_source(path: Path) -> None:
    database = open_database(f"sqlite:///{path}")
    try:
        create_source_tables(database)
    finally:
        database.close()


@contextlib.contextmanager
def postgres_server(engines: list[str]) -> Iterator[str | None]:
    """A throwaway cluster's base URL when PostgreSQL is among ``engines``."""
    if "postgresql" not in engines:
        yield None
        return
    from spark_examples.postgres_cluster import postgres_cluster, postgres_unavailable_reason

    reason = postgres_unavailable_reason()
    if reason is not None:
        raise SystemExit(f"needs PostgreSQL: {reason}")
    with postgres_cluster() as url:
        yield url


def destination(engine: str, work: Path, name: str, postgres: str | None) -> str:
    """A fresh, empty destination of ``engine``."""
    if engine == "sqlite":
        return f"sqlite:///{work}/{name}.db"
    if engine == "duckdb":
        return f"duckdb:///{work}/{name}.duckdb"
    import psycopg

    assert postgres is not None
    with psycopg.connect(postgres + "postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return postgres + name


def cells(arguments: argparse.Namespace) -> list[Cell]:
    """Full speed first (the figures that decide whether the apply keeps up), then paced;
    with Spark among the sinks, a cold backlog cell before them all (the warm-up)."""
    rates = [None if rate == "full" else int(rate) for rate in arguments.rates.split(",")]
    sinks, engines = arguments.sinks.split(","), arguments.engines.split(",")
    warm_up = [Cell(engines[0], "spark", None, backlog=True, cold=True)] if "spark" in sinks else []
    return warm_up + [
        Cell(engine, sink, rate, backlog)
        for rate in rates
        for backlog in ((True, False) if rate is None else (False,))
        for engine in engines
        for sink in sinks
    ]


def run_matrix(arguments: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    os.environ.update(registry_environment(work))
    filled = work / "filled.db"
    fill_source(filled, arguments.full_changes)
    broker = BrokerProcess(work / "broker", [REVIEW_HOOK]).start()
    spark = None
    results: list[dict[str, Any]] = []
    try:
        spark = kafka_spark_session("kshim-bench-db-sync")
        with postgres_server(arguments.engines.split(",")) as postgres:
            for index, cell in enumerate(cells(arguments)):
                name = f"c{index}_{cell.engine}_{cell.sink}_{cell.name}"
                source = work / f"{name}-source.db"
                if cell.rate is None:
                    shutil.copy(filled, source)
                    changes = arguments.full_changes
                else:
                    empty_source(source)
                    changes = cell.rate * arguments.paced_seconds
                dest = destination(cell.engine, work, name, postgres)
                figures = run_cell(
                    cell, work, broker.bootstrap, spark, f"sqlite:///{source}", dest, changes
                )
                differences = compare_tables(f"sqlite:///{source}", dest, TABLE_NAMES)
                figures["destination_equal"] = not differences
                figures["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
                results.append(figures)
                print_cell(figures)
                write_report(results, _machine(), vars(arguments))
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    return results


def print_cell(figures: dict[str, Any]) -> None:
    ratio = figures["apply_over_capture"] or 0.0
    print(
        f"{figures['engine']:>10} {figures['sink']:>8} {figures['rate']:>7}"
        f"  capture {figures['capture_per_s'] or 0:>8,.0f}/s"
        f"  apply {figures['apply_per_s'] or 0:>8,.0f}/s  ratio {ratio:5.2f}"
        f"  end-to-end {figures['end_to_end_per_s']:>8,.0f}/s"
        f"  lag p50 {figures['lag_p50_s']:.3f}s p99 {figures['lag_p99_s']:.3f}s"
        f"  equal {figures['destination_equal']}  load {' '.join(figures['loadavg'])}",
        flush=True,
    )


def _machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full-changes", type=int, default=200_000)
    parser.add_argument("--paced-seconds", type=int, default=10)
    parser.add_argument("--engines", default="sqlite,postgresql,duckdb")
    parser.add_argument("--sinks", default="spark,consumer")
    parser.add_argument("--rates", default="full,5000,1000")
    arguments = parser.parse_args()
    reason = connector_unavailable_reason()
    if reason is not None:
        raise SystemExit(f"needs the Spark Kafka connector: {reason}")
    with tempfile.TemporaryDirectory(prefix="kshim-db-sync-") as directory:
        run_matrix(arguments, Path(directory))


if __name__ == "__main__":
    main()
