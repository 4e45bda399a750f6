"""The apply sink alone: decoding and applying captured changes, without Kafka or Spark.

    python -m benchmarks.apply_sink [--records 100000] [--engines sqlite,duckdb]
        [--baseline DIR] [--rounds 3]

Both the Spark apply job and the plain consumer hand each micro-batch to the same sink
(spark_examples/apply/sink.py), so its cost per record bounds how fast either can apply.
The records are made as the capture makes them (spark_examples/change_format.py): random
inserts (40 %), updates (40 %) and deletes (20 %) over two tables of the usual column
types, in batches of 20,000 (the apply job's maxOffsetsPerTrigger). Per engine and
tree: the decoding alone and the whole batch (decode, keep each row's last change, write,
commit) in µs per record, the process's CPU per record included (this benchmark is one
process: no other tree to count). With ``--baseline``, the same measurement runs on that
checkout's spark_examples, rounds alternating, each in a process of its own. Writes
benchmarks/results/apply_sink.json and .md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the children import spark_examples from the tree they measure
    from spark_examples.databases import Columns

RESULTS = Path(__file__).parent / "results" / "apply_sink"
BATCH = 20_000
TOPIC = "shop"
TABLES: dict[str, Columns] = {
    "customers": {"id": "integer", "name": "text", "balance": "numeric", "active": "boolean",
                  "updated_at": "timestamp"},
    "orders": {"id": "integer", "customer_id": "integer", "amount": "real", "placed": "date",
               "note": "text", "payload": "blob"},
}  # fmt: skip


def random_row(generator: random.Random, table: str, row_id: int) -> dict[str, Any]:
    moment = datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=generator.randrange(10**7))
    if table == "customers":
        return {"id": row_id, "name": f"name {generator.randrange(1000)}",
                "balance": Decimal(generator.randrange(-(10**6), 10**6)) / 100,
                "active": generator.random() < 0.7, "updated_at": moment}  # fmt: skip
    return {"id": row_id, "customer_id": generator.randrange(1, 500),
            "amount": round(generator.uniform(0, 1000), 3), "placed": moment.date(),
            "note": None if generator.random() < 0.2 else f"note {generator.random():.5f}",
            "payload": generator.randbytes(generator.randrange(0, 24))}  # fmt: skip


def captured(count: int, seed: int = 3) -> list[Any]:
    """``count`` change records, as the capture writes them, at offsets 0..count-1."""
    from spark_examples.apply.sink import SourceRecord
    from spark_examples.change_format import encode_key, encode_value

    generator = random.Random(seed)
    live: dict[str, list[int]] = {table: [] for table in TABLES}
    next_id = dict.fromkeys(TABLES, 1)
    records = []
    for offset in range(count):
        table = generator.choice(list(TABLES))
        draw = generator.random()
        if not live[table] or draw < 0.4:
            row_id, op = next_id[table], "insert"
            next_id[table] += 1
            live[table].append(row_id)
        elif draw < 0.8:
            row_id, op = generator.choice(live[table]), "update"
        else:
            row_id = live[table].pop(generator.randrange(len(live[table])))
            records.append(SourceRecord(TOPIC, 0, offset, encode_key(table, {"id": row_id}), None))
            continue
        value = encode_value(offset, op, table, TABLES[table], random_row(generator, table, row_id))
        records.append(SourceRecord(TOPIC, 0, offset, encode_key(table, {"id": row_id}), value))
    return records


def measure(engine: str, count: int) -> dict[str, float]:
    """One tree's figures for ``engine`` (this process's spark_examples)."""
    from spark_examples.apply.sink import apply_batch, decode_kshim, ensure_state_table
    from spark_examples.databases import open_database

    records = captured(count)
    started, cpu = time.perf_counter(), time.process_time()
    for record in records:
        decode_kshim(record, lambda table: None)
    decode_s, decode_cpu = time.perf_counter() - started, time.process_time() - cpu
    with tempfile.TemporaryDirectory(prefix="bench-sink-") as directory:
        database = open_database(f"{engine}:///{directory}/dest.db")
        ensure_state_table(database)
        batches = []
        cpu = time.process_time()
        try:
            for start in range(0, count, BATCH):
                batch = records[start : start + BATCH]
                began = time.perf_counter()
                apply_batch(database, batch)
                batches.append((time.perf_counter() - began) / len(batch))
        finally:
            database.close()
        apply_cpu = time.process_time() - cpu
    return {
        "decode_us_per_record": decode_s / count * 1e6,
        "decode_cpu_us_per_record": decode_cpu / count * 1e6,
        # The first batch creates the tables; the median is of them all.
        "apply_us_per_record": statistics.median(batches) * 1e6,
        "apply_cpu_us_per_record": apply_cpu / count * 1e6,
    }


def measure_in(tree: Path | None, engine: str, count: int) -> dict[str, float]:
    """``measure`` in a process of its own, on ``tree``'s spark_examples (None: this one's)."""
    root = tree if tree is not None else Path(__file__).resolve().parent.parent
    # This file run with ``root`` first on the path, so that ``spark_examples`` is root's.
    code = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[2:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    command = [sys.executable, "-c", code, str(root), __file__, "--measure", engine,
               "--records", str(count)]  # fmt: skip
    printed = subprocess.run(command, capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(printed.stdout.strip().splitlines()[-1])
    return figures


def table(samples: dict[str, dict[str, list[dict[str, float]]]]) -> list[str]:
    trees = list(next(iter(samples.values())))
    metrics = list(next(iter(next(iter(samples.values())).values()))[0])
    lines = [
        "| engine | metric | " + " | ".join(trees) + " |",
        "|---|---|" + "---:|" * len(trees),
    ]
    for engine, by_tree in samples.items():
        for metric in metrics:
            cells = []
            for tree in trees:
                values = [run[metric] for run in by_tree[tree]]
                cells.append(
                    f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
                )
            lines.append(f"| {engine} | {metric} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--engines", default="sqlite,duckdb")
    parser.add_argument("--baseline", type=Path, help="also this checkout's spark_examples")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # one measurement, as a child
    arguments = parser.parse_args(argv)
    if arguments.measure:
        print(json.dumps(measure(arguments.measure, arguments.records)))
        return
    # Here, not at the top: a child runs this file on a baseline tree's packages, whose
    # benchmarks package may predate this module.
    from benchmarks.result_files import machine_load, write_result

    trees: dict[str, Path | None] = {"this tree": None}
    if arguments.baseline is not None:
        trees["baseline"] = arguments.baseline.resolve()
    engines = [name.strip() for name in arguments.engines.split(",") if name.strip()]
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        engine: {name: [] for name in trees} for engine in engines
    }
    for round_number in range(arguments.rounds):
        order = list(trees) if round_number % 2 == 0 else list(trees)[::-1]
        for engine in engines:
            for name in order:
                figures = measure_in(trees[name], engine, arguments.records)
                samples[engine][name].append(figures)
                print(f"round {round_number + 1} {engine} {name}: {figures}", flush=True)
    command = "python -m benchmarks.apply_sink " + " ".join(argv or sys.argv[1:])
    finished = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    heading = (
        f"`{command}`, {finished}, {machine_load()}; medians (min-max) of {arguments.rounds} "
        f"rounds, µs per record, {arguments.records:,} records in batches of {BATCH:,}"
    )
    document = {"command": command, "finished": finished, "trees": {
        name: None if tree is None else str(tree) for name, tree in trees.items()},
        "samples": samples}  # fmt: skip
    write_result(arguments.output, [heading, "", *table(samples)], document)


if __name__ == "__main__":
    main()
