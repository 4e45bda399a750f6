"""benchmarks/results/db_sync.json and .md from the cells of benchmarks/db_sync.py."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
HEADER = (
    "| destination | apply | rate | capture/s | apply/s | apply/capture | end-to-end/s "
    "| lag p50 s | lag p99 s | lag from | equal | load avg |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table_row(cell: dict[str, Any]) -> str:
    capture, apply, ratio = cell["capture_per_s"], cell["apply_per_s"], cell["apply_over_capture"]
    return (
        f"| {cell['engine']} | {cell['sink']} | {cell['rate']} "
        f"| {_number(capture)} | {_number(apply)} | {_number(ratio, 2)} "
        f"| {_number(cell['end_to_end_per_s'])} | {cell['lag_p50_s']:.3f} "
        f"| {cell['lag_p99_s']:.3f} | {cell['lag_from']} | {cell['destination_equal']} "
        f"| {' '.join(cell['loadavg'])} |"
    )


def write_report(cells: list[dict[str, Any]], machine: str, arguments: dict[str, Any]) -> None:
    """Writes both files (overwriting them) with every cell so far."""
    RESULTS.mkdir(exist_ok=True)
    finished = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    report = {"machine": machine, "arguments": arguments, "finished": finished, "cells": cells}
    (RESULTS / "db_sync.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "# Database synchronisation: capture, apply and lag per destination",
        "",
        f"`python -m benchmarks.db_sync`, {machine}, {finished}; arguments {arguments}.",
        "Columns: benchmarks/db_sync.py's docstring. SQLite is a single writer: its figures",
        "are stated as they are.",
        "",
        HEADER,
        *(table_row(cell) for cell in cells),
        "",
    ]
    (RESULTS / "db_sync.md").write_text("\n".join(lines))
