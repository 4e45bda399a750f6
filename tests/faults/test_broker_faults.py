"""The whole-broker fault schedules (broker_driver.py): kill -9 of ``kshim serve`` at
random moments under idempotent, transactional, keyed and delayed load with a consumer
group committing; the history must check clean. ``KSHIM_BROKER_FAULT_SEEDS=N`` runs N
schedules instead of CI's few."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.broker_driver import BrokerRun

CI_SEEDS = 2
KILLS = 3
SEEDS = range(int(os.environ.get("KSHIM_BROKER_FAULT_SEEDS", str(CI_SEEDS))))


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("seed", SEEDS)
def test_broker_kill_schedule_checks_clean(tmp_path: Path, seed: int) -> None:
    run = BrokerRun(tmp_path / "data", seed, KILLS)
    violations = run.run()
    assert not violations, f"seed {seed}: {violations[:10]}"
    acknowledged = [op for op in run.history.ops if op.kind.value == "ok"]
    assert {op.f for op in acknowledged} == {"append", "txn", "delay"}, "a kind of load never ran"
