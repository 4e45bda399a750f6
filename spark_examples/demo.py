"""The whole pipeline in one command, on embedded defaults:

    bash scripts/demo.sh [--operations 6000] [--rate 300] [--work-dir DIR]

(or ``python -m spark_examples.demo`` in an environment with kshim's ``demo`` extra)

1. a kshim broker with the capture review hook, in a work directory;
2. a SQLite source (customers, orders) with capture triggers, and random inserts, updates
   and deletes running against it;
3. the capture process shipping them to topic ``shop`` in Kafka transactions;
4. the Spark apply job streaming ``shop`` into a SQLite and a DuckDB destination;
5. half-way, a third destination (SQLite) bootstrapped from ``shop.full``;
6. once the activity stops: wait until everything is captured and applied, then verify
   each destination against the source and print whether it is equal.

Exits 0 only if every destination equals the source. Everything it starts is stopped at
the end; the work directory (a temporary one unless ``--work-dir``) holds the logs.

Before it imports any of them or starts anything, it checks what it needs, and says in
one line what to do about what is missing: the Python packages of the ``demo`` extra, a
Java runtime, and Spark's Kafka connector (spark_examples/connector_check.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence

from spark_examples.connector_check import require_spark_connector

# The packages the pipeline imports beyond kshim's own (pyproject.toml's ``demo`` extra).
DEMO_PACKAGES = {"pyspark": "pyspark", "confluent_kafka": "confluent-kafka", "duckdb": "duckdb"}
SETUP_HINT = "run bash scripts/demo.sh, which installs them (or pip install -e '.[demo]')"
USAGE_STATUS = 2


def missing_packages() -> list[str]:
    """The demo's packages this Python cannot import, by their names on PyPI."""
    return [
        name for module, name in DEMO_PACKAGES.items() if importlib.util.find_spec(module) is None
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_examples.demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--operations", type=int, default=6000, help="changes to generate")
    parser.add_argument("--rate", type=int, default=300, help="changes per second")
    parser.add_argument("--work-dir", help="keep everything here (default: a temporary dir)")
    arguments = parser.parse_args(argv)
    missing = missing_packages()
    if missing:
        print(f"demo: error: {', '.join(missing)} not installed: {SETUP_HINT}", file=sys.stderr)
        return USAGE_STATUS
    # Java and the connector before the broker and the capture: without them, Spark would
    # fail only after they started, with an error far from the cause.
    require_spark_connector("demo")
    from spark_examples.demo_pipeline import run_demo, say

    equal = run_demo(arguments.operations, arguments.rate, arguments.work_dir, say)
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
