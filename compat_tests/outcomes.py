"""A pytest plugin writing one JSON object per compatibility test outcome, for report.py.

Loaded with ``-p compat_tests.outcomes``; it writes only when ``KSHIM_COMPAT_OUTCOMES``
names a file: ``{"records": [...], "status": pytest's exit status, "elapsed_s": ...}``.
Only tests under compat_tests/ are recorded, so the plugin can ride along the whole test
run (scripts/test.sh) and the report still sees only the suite. Each record holds the
scenario (the test without its broker parameter), the broker, the outcome (passed, failed,
skipped, xfailed, xpassed), a one-line message and the test's markers, so the report never
parses test ids.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

OUTPUT_VARIABLE = "KSHIM_COMPAT_OUTCOMES"
_RECORDS: dict[str, dict[str, Any]] = {}
_SUITE = Path(__file__).resolve().parent
_STARTED: list[float] = []


def scenario_of(item: pytest.Item) -> tuple[str, str | None]:
    """(module::test[other params], broker or None) of a collected test."""
    module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    name = getattr(item, "originalname", item.name)
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return f"{module}::{name}", None
    params = dict(callspec.params)
    broker = params.pop("broker", None)
    shown = [_shown(value) for value in params.values()]
    label = f"{module}::{name}" + (f"[{'-'.join(shown)}]" if shown else "")
    return label, broker if isinstance(broker, str) else None


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return f"api{value[0]}-v{value[1]}"
    return str(value)


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def message_of(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return first_line(str(longrepr[2]).removeprefix("Skipped: "))
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return first_line(crash.message)
    return first_line(str(longrepr or ""))


def outcome_of(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else "xfailed"
    return report.outcome


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not os.environ.get(OUTPUT_VARIABLE) or _SUITE not in item.path.parents:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        scenario, broker = scenario_of(item)
        _RECORDS[item.nodeid] = {
            "nodeid": item.nodeid,
            "scenario": scenario,
            "broker": broker,
            "outcome": outcome_of(report),
            "message": message_of(report)
            if not report.passed or hasattr(report, "wasxfail")
            else "",
            "xfail_reason": getattr(report, "wasxfail", ""),
            "duration_s": round(report.duration, 3),
            "markers": sorted({mark.name for mark in item.iter_markers()} - {"parametrize"}),
        }
    elif report.when == "teardown" and report.failed and item.nodeid in _RECORDS:
        _RECORDS[item.nodeid].update(outcome="failed", message="teardown: " + message_of(report))


def pytest_sessionstart(session: pytest.Session) -> None:
    _STARTED.append(time.monotonic())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get(OUTPUT_VARIABLE)
    if path:
        elapsed = time.monotonic() - _STARTED[0] if _STARTED else 0.0
        saved = {"records": list(_RECORDS.values()), "status": int(exitstatus)}
        saved["elapsed_s"] = round(elapsed, 1)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(saved, handle, indent=1)
