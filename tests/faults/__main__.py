"""``python -m tests.faults --schedules 1000 [--first-seed S]``: the store-level fault
schedules by hand, for longer than CI runs them; prints the summary and exits 1 on any
violation, naming the seeds that found them."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from tests.faults.store_driver import run_store_schedule
from tests.faults.summary import Summary


async def _run(first_seed: int, schedules: int) -> Summary:
    summary = Summary()
    for seed in range(first_seed, first_seed + schedules):
        summary.add(await run_store_schedule(seed))
        if summary.schedules % 100 == 0:
            print(f"{summary.schedules} schedules, {len(summary.failing)} failing", flush=True)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults")
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)  # the store logs every torn tail it cuts
    summary = asyncio.run(_run(arguments.first_seed, arguments.schedules))
    print(summary.report())
    return 1 if summary.failing else 0


if __name__ == "__main__":
    sys.exit(main())
