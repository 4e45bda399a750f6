"""Transactional versus plain produce throughput on kshim, in the same run.

    python -m benchmarks.transactions [--records 200000] [--per-transaction 1000]

Prints a table and writes benchmarks/results/transactions.json. Plain writes are
idempotent with acks=all; transactional writes commit every ``--per-transaction`` records
(each commit writes and fsyncs a marker before EndTxn is answered).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.brokers import running
from benchmarks.workloads import create_topic, produce, produce_transactional

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--per-transaction", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    runs: dict[str, list[float]] = {"plain": [], "transactional": []}
    for _ in range(arguments.repeats):
        with running("kshim") as broker:
            create_topic(broker, "plain")
            create_topic(broker, "txn")
            plain = produce(broker, "plain", arguments.records, arguments.record_bytes,
                            **{"linger.ms": 5})  # fmt: skip
            txn = produce_transactional(broker, "txn", arguments.records, arguments.record_bytes,
                                        arguments.per_transaction)  # fmt: skip
            runs["plain"].append(plain.records_per_second)
            runs["transactional"].append(txn.records_per_second)
    report: dict[str, Any] = {
        "records": arguments.records,
        "record_bytes": arguments.record_bytes,
        "per_transaction": arguments.per_transaction,
        **{
            name: {"records_per_s": statistics.median(rates), "runs": rates}
            for name, rates in runs.items()
        },
    }
    ratio = report["transactional"]["records_per_s"] / report["plain"]["records_per_s"]
    report["transactional_over_plain"] = ratio
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "transactions.json").write_text(json.dumps(report, indent=2))
    print("| writes | records/s (median) |\n|---|---|")
    for name in runs:
        print(f"| {name} | {report[name]['records_per_s']:,.0f} |")
    print(f"\ntransactional / plain: {ratio:.2f}x ({arguments.per_transaction} records per txn)")


if __name__ == "__main__":
    main()
