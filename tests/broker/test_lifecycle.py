"""A broker from start to stop: its background jobs started after the load, ended by stop()."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.jobs.broker_jobs import broker_jobs
from kshim.broker.jobs.runner import Job
from kshim.broker.lifecycle import BrokerRunner


def new_broker(tmp_path: Path) -> Broker:
    return Broker(
        BrokerConfig.load([{"log.dirs": str(tmp_path), "kshim.full.view.process": "false"}])
    )


async def test_stop_ends_every_job_and_closes_the_broker(tmp_path: Path) -> None:
    broker = new_broker(tmp_path)
    started = asyncio.Event()
    ended = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    def only_forever(_: Broker) -> list[Job]:
        return [Job("forever", forever)]

    runner = BrokerRunner(broker, only_forever)
    await runner.start()
    await asyncio.wait_for(started.wait(), timeout=5)
    await runner.stop()
    assert ended.is_set()
    assert [task for task in asyncio.all_tasks() if task.get_name() == "forever"] == []
    assert not broker.data_dir_lock.held  # the broker closed


async def test_every_background_job_runs_under_the_runner(tmp_path: Path) -> None:
    broker = new_broker(tmp_path)
    runner = BrokerRunner(broker)
    await runner.start()
    running = {task.get_name() for task in asyncio.all_tasks()}
    await runner.stop()
    names = [job.name for job in broker_jobs(broker)]
    assert len(set(names)) == len(names) == 10
    assert set(names) <= running
