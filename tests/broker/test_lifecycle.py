"""The broker's background jobs: supervised, restarted after a failure, ended by stop()."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from kshim.broker import lifecycle
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.lifecycle import BrokerRunner, supervise


async def test_a_failing_job_is_logged_and_started_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(lifecycle, "RESTART_DELAY_S", 0)
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError(f"pass {runs} broke")

    with caplog.at_level(logging.ERROR, logger="kshim.broker.lifecycle"):
        await asyncio.wait_for(supervise("flaky", flaky), timeout=5)
    assert runs == 3
    failures = [record for record in caplog.records if "flaky failed" in record.getMessage()]
    assert len(failures) == 2
    assert all(record.exc_info is not None for record in failures)


async def test_stop_ends_every_job_and_closes_the_broker(tmp_path: Path) -> None:
    broker = Broker(
        BrokerConfig.load([{"log.dirs": str(tmp_path), "kshim.full.view.process": "false"}])
    )
    started = asyncio.Event()
    ended = asyncio.Event()

    async def forever(_: Broker) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    runner = BrokerRunner(broker, {"forever": forever})
    await runner.start()
    await asyncio.wait_for(started.wait(), timeout=5)
    await runner.stop()
    assert ended.is_set()
    assert [task for task in asyncio.all_tasks() if task.get_name() == "forever"] == []


async def test_every_background_job_runs_under_the_runner(tmp_path: Path) -> None:
    broker = Broker(
        BrokerConfig.load([{"log.dirs": str(tmp_path), "kshim.full.view.process": "false"}])
    )
    runner = BrokerRunner(broker)
    await runner.start()
    running = {task.get_name() for task in asyncio.all_tasks()}
    await runner.stop()
    assert set(lifecycle.BACKGROUND_JOBS) <= running
