"""The store-level fault schedules (store_driver.py) in CI: a bounded number of seeds,
each a few power cuts, full disks and failing writes or syncs under idempotent,
transactional and compacted load over up to 40 partitions; every one must check clean.
``KSHIM_FAULT_SEEDS=N`` runs N of them, ``python -m tests.faults`` many more by hand."""

from __future__ import annotations

import pytest

from tests.faults.schedule import FaultKind, store_schedule
from tests.faults.store_driver import run_store_schedule
from tests.faults.summary import Summary, seeds

CI_SCHEDULES = 100


async def test_store_schedules_check_clean(capsys: pytest.CaptureFixture[str]) -> None:
    summary = Summary()
    for seed in seeds(CI_SCHEDULES):
        summary.add(await run_store_schedule(seed))
    with capsys.disabled():
        print("\n" + summary.report())
    assert not summary.failing, summary.report()
    assert summary.schedules == len(seeds(CI_SCHEDULES))
    # The budget is only worth it if every kind of fault and the syncfs-sized rounds ran.
    assert set(summary.faults) == {kind.value for kind in FaultKind}
    assert summary.injected["write"] > 0 and summary.injected["sync"] > 0
    assert any(store_schedule(seed).partitions >= 16 for seed in seeds(CI_SCHEDULES))
