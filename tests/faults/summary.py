"""Runs many schedules and sums them up: schedules run, faults per kind, violations."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from tests.faults.checker import Violation
from tests.faults.store_driver import Outcome

SEEDS_VARIABLE = "KSHIM_FAULT_SEEDS"  # how many store-level schedules to run
FIRST_SEED_VARIABLE = "KSHIM_FAULT_FIRST_SEED"


def seeds(default: int) -> range:
    """The seeds to run: ``KSHIM_FAULT_SEEDS`` of them (``default`` without it), from
    ``KSHIM_FAULT_FIRST_SEED`` (0)."""
    count = int(os.environ.get(SEEDS_VARIABLE, str(default)))
    first = int(os.environ.get(FIRST_SEED_VARIABLE, "0"))
    return range(first, first + count)


@dataclass
class Summary:
    schedules: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    injected: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    failing: dict[int, list[Violation]] = field(default_factory=dict)  # by seed

    def add(self, outcome: Outcome) -> None:
        self.schedules += 1
        self.faults.update(outcome.faults)
        self.injected.update(outcome.injected)
        self.acknowledged += outcome.acknowledged
        if outcome.violations:
            self.failing[outcome.schedule.seed] = outcome.violations

    def report(self) -> str:
        lines = [
            f"schedules run: {self.schedules}",
            "faults by kind: " + _counts(self.faults),
            "failed calls injected: " + _counts(self.injected),
            f"operations acknowledged: {self.acknowledged}",
            f"violations: {sum(map(len, self.failing.values()))}",
        ]
        for seed, violations in sorted(self.failing.items()):
            shown = "; ".join(f"{v.kind}: {v.detail}" for v in violations[:5])
            lines.append(f"  seed {seed}: {shown}")
        return "\n".join(lines)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{kind} {count}" for kind, count in sorted(counter.items())) or "none"
