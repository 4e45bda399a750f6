"""kshim next to Kafka: the scenarios where their verdicts differ, for RESULTS.md.

A scenario is compared when it ran (passed or failed) on both brokers; one skipped on
either side says nothing about the other. A disagreement that one of kshim's intended
differences (deviations.KSHIM_INTENDED_DIFFERENCES) names is listed apart, with its code;
every other one is a finding: a kshim bug, a scenario that asserts more than Kafka does,
or a Kafka configured unlike its defaults.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compat_tests.deviations import KSHIM_INTENDED_DIFFERENCES, IntendedDifference

Record = dict[str, Any]
PASSED, FAILED, SKIPPED = "pass", "fail", "skip"
VERDICTS = {
    "passed": PASSED,
    "xpassed": PASSED,
    "failed": FAILED,
    "xfailed": FAILED,
    "skipped": SKIPPED,
}


@dataclass(frozen=True, slots=True)
class Disagreement:
    scenario: str
    ours: Record
    theirs: Record
    explained_by: str | None  # an intended difference's code, or None


def verdict(record: Record) -> str:
    """pass, fail or skip: what a broker made of a scenario, whatever the reason."""
    return VERDICTS.get(record["outcome"], FAILED)


def by_scenario(records: Sequence[Record], broker: str) -> dict[str, Record]:
    return {record["scenario"]: record for record in records if record["broker"] == broker}


def compared(records: Sequence[Record], ours: str = "kshim", theirs: str = "kafka") -> list[str]:
    """The scenarios that ran (not skipped) on both brokers, in the records' order."""
    left, right = by_scenario(records, ours), by_scenario(records, theirs)
    return [
        scenario
        for scenario, record in left.items()
        if scenario in right and SKIPPED not in (verdict(record), verdict(right[scenario]))
    ]


def intended_difference(
    scenario: str, differences: Sequence[IntendedDifference] = KSHIM_INTENDED_DIFFERENCES
) -> IntendedDifference | None:
    """The first intended difference naming ``scenario``, or None."""
    for difference in differences:
        if any(fnmatch.fnmatchcase(scenario, pattern) for pattern in difference.scenarios):
            return difference
    return None


def explanation(
    scenario: str, differences: Sequence[IntendedDifference] = KSHIM_INTENDED_DIFFERENCES
) -> str | None:
    """The code of the first intended difference naming ``scenario``, or None."""
    difference = intended_difference(scenario, differences)
    return difference.code if difference is not None else None


def disagreements(
    records: Sequence[Record],
    ours: str = "kshim",
    theirs: str = "kafka",
    differences: Sequence[IntendedDifference] = KSHIM_INTENDED_DIFFERENCES,
) -> list[Disagreement]:
    """Every compared scenario whose verdicts differ (pass on one broker, fail on the other)."""
    left, right = by_scenario(records, ours), by_scenario(records, theirs)
    return [
        Disagreement(scenario, left[scenario], right[scenario], explanation(scenario, differences))
        for scenario in compared(records, ours, theirs)
        if verdict(left[scenario]) != verdict(right[scenario])
    ]


def escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def shown(record: Record) -> str:
    """A verdict with the first line of its error."""
    if verdict(record) == FAILED and record["message"]:
        return f"**fail**: {escape(record['message'])}"
    return verdict(record)


def section(
    records: Sequence[Record],
    source: str,
    differences: Sequence[IntendedDifference] = KSHIM_INTENDED_DIFFERENCES,
) -> list[str]:
    """The report's "kshim and Kafka disagree" section; ``source`` says which Kafka ran."""
    verdicts: dict[str, int] = defaultdict(int)
    for record in records:
        if record["broker"] == "kafka":
            verdicts[verdict(record)] += 1
    if not verdicts[PASSED] + verdicts[FAILED]:
        return ["Kafka ran no scenario here, so nothing was compared."]
    found = disagreements(records, differences=differences)
    unexplained = [item for item in found if item.explained_by is None]
    explained = [item for item in found if item.explained_by is not None]
    return [
        f"Kafka: {source}. Of {len(compared(records))} scenarios run on both, kshim and Kafka "
        f"disagree on {len(found)}: {len(unexplained)} that no intended difference explains, "
        f"{len(explained)} that one does.",
        "",
        "Not explained by an intended difference (each is a kshim bug, a scenario asserting "
        "more than Kafka does, or a Kafka configured unlike its defaults):",
        "",
        *table(unexplained, with_code=False),
        "",
        "Explained by an intended difference (below):",
        "",
        *table(explained, with_code=True),
    ]


def table(found: Sequence[Disagreement], with_code: bool) -> list[str]:
    if not found:
        return ["- none"]
    extra = " intended difference |" if with_code else ""
    lines = [
        f"| scenario | kshim | Kafka |{extra}",
        "|---|---|---|" + ("---|" if with_code else ""),
    ]
    for item in found:
        code = f" {item.explained_by} |" if with_code else ""
        lines.append(f"| `{item.scenario}` | {shown(item.ours)} | {shown(item.theirs)} |{code}")
    return lines
