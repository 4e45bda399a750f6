"""The tables of docs/performance.md and spark_examples/README.md, written from the
benchmarks' result files so that no figure in those tables is typed by hand.

    python -m benchmarks.performance_page          # rewrites the tables in the pages
    python -m benchmarks.performance_page --check  # exits 1 when a table differs

Each table sits between ``<!-- table: NAME -->`` and ``<!-- end of table -->`` in a
page; the text around it is left as it is.
benchmarks/test_performance_page.py runs the check.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"
PAGES = (PAGE, ROOT / "spark_examples" / "README.md")
BLOCK = re.compile(r"(<!-- table: ([a-z_]+) -->\n)(.*?)(<!-- end of table -->)", re.DOTALL)
SECURITY_SHAPES = {
    "produce 1 KiB": "confluent-kafka produce 1 KiB",
    "consume 1 KiB": "confluent-kafka consume 1 KiB",
    "produce 100 B": "confluent-kafka produce 100 B",
    "consume 100 B": "confluent-kafka consume 100 B",
    "produce 1 KiB, raw client": "the broker alone, produce 1 KiB (1 MiB requests, 5 in flight)",
    "consume 1 KiB, raw client": "the broker alone, consume 1 KiB (1 MiB fetches, one at a time)",
    "produce 1 KiB, Java client": "Java client produce 1 KiB (its defaults)",
    "consume 1 KiB, Java client": "Java client consume 1 KiB",
}
METRICS_SHAPES = {
    "throughput": "100 B records to one topic, linger 5 ms",
    "small_requests": "one record per Produce request",
    "topics_100": "100 topics, linger 5 ms",
}


def load(name: str) -> Any:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def number(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def cpu(value: float) -> str:
    """A CPU figure, or ``-`` where the run could not tell (NaN: the Java client runs in
    the same JVM process tree as nothing the benchmark measures per record)."""
    return "-" if math.isnan(value) else f"{value:.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def security_throughput() -> str:
    """SASL_SSL against PLAINTEXT per client shape (benchmarks/results/security.json)."""
    result = load("security.json")
    rows = []
    for shape, label in SECURITY_SHAPES.items():
        measured = result["throughput"].get(shape)
        if measured is None:
            continue
        plain, secured = measured["median"]["PLAINTEXT"], measured["median"]["SASL_SSL"]
        paired = measured["paired_ratios"]
        rows.append(
            (
                label,
                number(plain["records_per_s"]),
                number(secured["records_per_s"]),
                f"{measured['ratio_of_medians']:.2f}x ({min(paired):.2f}-{max(paired):.2f})",
                f"{cpu(plain['broker_cpu_us_per_record'])} / "
                f"{cpu(secured['broker_cpu_us_per_record'])}",
                measured["verdict"],
            )
        )
    header = (
        "records/s (medians)",
        "PLAINTEXT",
        "SASL_SSL",
        "SASL_SSL/PLAINTEXT (per repeat)",
        "broker CPU µs a record",
        f"target: {result['targets']['throughput']}",
    )
    return finished(result) + table(header, rows)


def security_connections() -> str:
    result = load("security.json")
    rows = [
        (name, number(item["per_s"]), f"{item['broker_cpu_ms_each']:.2f}")
        for name, item in result["connections"].items()
    ]
    return table(("new connections", "a second", "broker CPU ms each"), rows)


def security_floods() -> str:
    result = load("security.json")
    rows = []
    for name, flood in result["floods"].items():
        before, during = flood["before"]["records_per_s"], flood["during"]["records_per_s"]
        rows.append(
            (
                name,
                number(flood["attempts_per_s"]),
                f"{flood['broker_cpu_ms_per_attempt']:.2f}",
                f"{during / before:.2f}x",
            )
        )
    header = (
        "wrong passwords from one address",
        "tries a second",
        "broker CPU ms a try",
        f"producer's rate during / before (target: {result['targets']['flood']})",
    )
    return table(header, rows)


def metrics_cost() -> str:
    """Metrics off and on, scraped every second (benchmarks/results/metrics.json)."""
    result = load("metrics.json")
    rows = []
    for shape, label in METRICS_SHAPES.items():
        measured = result["shapes"].get(shape)
        if measured is None:
            continue
        off, on = measured["metrics off"], measured["metrics on"]
        ratio = measured["ratios"]["records_per_s_on_over_off"]
        rows.append(
            (
                label,
                f"{number(off['records_per_s']['median'])} / "
                f"{number(on['records_per_s']['median'])}",
                f"{ratio['of_medians']:.3f}; {ratio['paired']['median']:.3f}",
                f"{off['broker_cpu_us_per_record']['median']:.2f} / "
                f"{on['broker_cpu_us_per_record']['median']:.2f}",
                f"{on['broker_cpu_ms_per_scrape']['median']:.1f} ms, "
                f"{on['scrape_bytes'] / 1000:.0f} KB",
                measured["verdict"],
            )
        )
    header = (
        "shape",
        "records/s, off / on (medians)",
        "on/off: of medians; median of pairs",
        "broker CPU µs a record, off / on",
        "one scrape: broker CPU, answer",
        f"target: {result['target']}",
    )
    return finished(result) + table(header, rows)


def delay_runs() -> str:
    """The delayed-delivery parts run after the worker process was merged."""
    rates = load("delay-merged-rates_2026-11-27.json")
    spread = load("delay-merged-spread_2026-11-27.json")
    burst = load("delay-merged-burst_2026-11-27.json")["burst"]
    pending = load("delay-merged-pending_2026-11-27.json")["pending"]
    arguments = spread["arguments"]
    lateness = spread["spread"]
    rows = [
        (
            f"{number(arguments['spread'])} records due over {arguments['spread_minutes']:.0f} "
            f"minutes, a plain producer at {number(arguments['plain_rate'])} records/s "
            "meanwhile: lateness p50 / p99 / max, ms",
            f"{lateness['lateness_p50_ms']:.0f} / {lateness['lateness_p99_ms']:.0f} / "
            f"{lateness['lateness_max_ms']:.0f}; early: {lateness['early']}; delivered "
            f"{number(lateness['distinct_delayed_from'])} of {number(lateness['records'])}",
            "<= 20 / 100 / 1,000",
        ),
        *(
            (
                "produce to `T.delay` against a plain topic in the same run, records/s read "
                "into the schedule",
                f"{number(run['delayed']['scheduled_records_per_s'])} against "
                f"{number(run['plain']['records_per_s'])} "
                f"({run['delayed']['scheduling_ratio_to_plain']:.2f}x)",
                ">= 0.5x",
            )
            for run in (rates, spread)
        ),
        (
            f"{number(burst['records'])} records due in the same millisecond: dispatch "
            "rate, records/s",
            number(burst["dispatch_records_per_s"]),
            ">= 50,000",
        ),
        (
            f"{number(pending['pending_after_restart'])} pending: RSS at rest / peak while "
            "reading them in, MB",
            f"{pending['rss_at_rest_mb']:.0f} / {pending['peak_rss_mb']:.0f}",
            "<= 150",
        ),
        (
            "the same: first answer after kill -9, s",
            f"{pending['first_answer_after_kill_s']:.2f}",
            "< 2",
        ),
        (
            "the same: schedule on disk against the records in `T.delay`'s log",
            f"{pending['disk_ratio_to_records']:.2f}x",
            "<= 1.5x",
        ),
    ]
    return table(("measurement", "kshim", "wanted"), rows)


DB_SYNC_ENGINES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "duckdb": "DuckDB"}
DB_SYNC_SINKS = {"spark": "Spark", "consumer": "consumer"}


def db_sync_cells() -> str:
    """spark_examples/README.md's table: benchmarks/results/db_sync.json, a line per
    destination and apply kind (the cold warm-up cell apart, below the table)."""
    result = load("db_sync.json")
    cells = {(cell["engine"], cell["sink"], cell["rate"]): cell for cell in result["cells"]}

    def lag(engine: str, sink: str, rate: str) -> str:
        cell = cells.get((engine, sink, rate))
        return "-" if cell is None else f"{cell['lag_p50_s']:.2f} / {cell['lag_p99_s']:.2f}"

    rows = []
    for (engine, sink, rate), cell in cells.items():
        if rate != "backlog":
            continue
        rows.append((
            DB_SYNC_ENGINES[engine], DB_SYNC_SINKS[sink], number(cell["capture_per_s"]),
            number(cell["apply_per_s"]), f"{cell['apply_over_capture']:.2f}",
            lag(engine, sink, "full"), lag(engine, sink, "5000"), lag(engine, sink, "1000"),
        ))  # fmt: skip
    header = ("destination", "apply", "backlog: capture alone, changes/s",
              "backlog: apply alone, changes/s", "apply/capture", "full speed: lag p50 / p99 s",
              "5,000/s: lag p50 / p99 s", "1,000/s: lag p50 / p99 s")  # fmt: skip
    arguments = " ".join(f"--{name.replace('_', '-')} {value}"
                         for name, value in result["arguments"].items())  # fmt: skip
    when = f", finished {result['finished']}" if "finished" in result else ""
    text = f"`python -m benchmarks.db_sync {arguments}`, {result['machine']}{when}:\n\n"
    text += table(header, rows)
    for (engine, sink, rate), cell in cells.items():
        if rate == "cold-backlog":
            text += (
                f"\nThe warm-up, first of the run ({DB_SYNC_ENGINES[engine]}, "
                f"{DB_SYNC_SINKS[sink]}, backlog, on a JVM that had run no batch yet): "
                f"capture {number(cell['capture_per_s'])}, apply "
                f"{number(cell['apply_per_s'])} changes/s, apply/capture "
                f"{cell['apply_over_capture']:.2f}.\n"
            )
    return text


def finished(result: Any) -> str:
    """The line that says when and how the run was made."""
    return f"`{result['command']}`, finished {result['finished']}:\n\n"


TABLES: dict[str, Callable[[], str]] = {
    "security_throughput": security_throughput,
    "security_connections": security_connections,
    "security_floods": security_floods,
    "metrics_cost": metrics_cost,
    "delay_runs": delay_runs,
    "db_sync_cells": db_sync_cells,
}


def rendered(page: str) -> str:
    """``page`` with every table block written anew; raises KeyError for a block whose
    name no function here writes."""

    def replace(match: re.Match[str]) -> str:
        opening, name, _, closing = match.groups()
        return f"{opening}{TABLES[name]()}{closing}"

    return BLOCK.sub(replace, page)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a table differs")
    arguments = parser.parse_args(argv)
    differs = False
    for path in PAGES:
        page = path.read_text(encoding="utf-8")
        fresh = rendered(page)
        if fresh == page:
            continue
        if arguments.check:
            print(f"{path} differs from its result files: python -m benchmarks.performance_page")
            differs = True
        else:
            path.write_text(fresh, encoding="utf-8")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
