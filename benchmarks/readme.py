"""The README's performance table, generated from a benchmarks.run result and never typed.

    python -m benchmarks.readme            # README.md's block, from benchmarks/results/report.json
    python -m benchmarks.readme --check    # exit status 1 when README.md's block is out of date
    python -m benchmarks.readme --report /tmp/run/report.json --readme README.md

Rewrites what lies between the lines BEGIN and END of the README (the two markers stay) with
what the run was (date, command, machine, each broker and the settings read back from each
Kafka) and one row per headline of benchmarks/targets.py: every broker's median and kshim's
ratios to the target's Kafka column and to Tansu. A report from a ``--quick`` or
``--smoke`` run is refused (its counts are too small to quote) unless ``--any-scale``.
benchmarks.run writes the same block to readme_table.md beside report.md, to look at.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.report import headline_table, machine_line, setup_lines, summarise, targets_met
from benchmarks.targets import check_targets

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "benchmarks" / "results" / "report.json"
README = ROOT / "README.md"
BEGIN = "<!-- begin: python -m benchmarks.readme -->"
END = "<!-- end: python -m benchmarks.readme -->"
FULL = "full"


def block(results: dict[str, Any]) -> str:
    """The block's text (without the markers), from a benchmarks.run result."""
    scale = results["scale"]
    lines = [
        f"Last run: {results['generated_utc']}, `{results['command'].strip()}`, "
        f"{results['elapsed_s'] / 60:.0f} minutes on {machine_line(results)}. Each workload "
        f"on a fresh broker and data directory, the brokers alternating within each of "
        f"{scale['repeats']} repeats, with the same clients (confluent-kafka, and kafka-python "
        "for the VENUS row changes; acks=all); medians, and kshim's median over the named "
        f"broker's. {targets_met(results)}.",
        "",
        *setup_lines(results),
        "",
        *headline_table(results),
        "",
        "Every target, every metric with its spread and the plots: "
        "[benchmarks/results/report.md](benchmarks/results/report.md).",
    ]
    return "\n".join(lines)


def scale_name(results: dict[str, Any]) -> str:
    """full, quick or smoke (told by the run's flags in a report written before the run
    recorded it)."""
    if "scale_name" in results:
        return str(results["scale_name"])
    flags = results["command"].split()
    return "smoke" if "--smoke" in flags else "quick" if "--quick" in flags else FULL


def rewrite(text: str, generated: str) -> str:
    """``text`` with the lines between the markers replaced by ``generated``; raises
    ValueError unless each marker is on a line of its own, once, BEGIN first."""
    lines = text.split("\n")
    begins = [index for index, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [index for index, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ValueError(f"the README needs one line {BEGIN} and, after it, one line {END}")
    return "\n".join([*lines[: begins[0] + 1], generated, *lines[ends[0] :]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--report", type=Path, default=REPORT, help="a benchmarks.run report.json")
    parser.add_argument("--readme", type=Path, default=README, help="the file with the markers")
    parser.add_argument("--check", action="store_true", help="exit 1 if the block is stale")
    parser.add_argument("--any-scale", action="store_true", help="accept a quick or smoke run")
    arguments = parser.parse_args(argv)
    results = json.loads(arguments.report.read_text())
    # Summarised and checked again, as benchmarks.run --render-only does: the targets of
    # benchmarks/targets.py applied to the run's samples.
    results["summary"] = summarise(results)
    results["targets"] = check_targets(results["summary"])
    scale = scale_name(results)
    if scale != FULL and not arguments.any_scale:
        parser.error(f"{arguments.report} is from a --{scale} run; give --any-scale to use it")
    text = arguments.readme.read_text()
    try:
        updated = rewrite(text, block(results))
    except ValueError as error:
        parser.error(f"{arguments.readme}: {error}")
    if arguments.check:
        if updated != text:
            print(f"{arguments.readme}: the block differs from {arguments.report}; run "
                  "python -m benchmarks.readme", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    arguments.readme.write_text(updated)
    print(f"{arguments.readme}: performance block rewritten from {arguments.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
