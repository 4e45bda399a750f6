"""A broker from start to stop: its state loaded, its background jobs (kshim/broker/jobs/)
run, then ended before its stores close."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kshim.broker.broker import Broker
from kshim.broker.jobs.broker_jobs import broker_jobs
from kshim.broker.jobs.runner import Job, JobRunner


class BrokerRunner:
    """Owns a broker's background jobs: ``start`` loads the broker and starts them,
    ``stop`` ends them and closes the broker's stores. Event-loop thread only."""

    def __init__(
        self, broker: Broker, jobs: Callable[[Broker], Iterable[Job]] = broker_jobs
    ) -> None:
        """``jobs``: the jobs to run for the broker (tests pass others)."""
        self.broker = broker
        self._jobs = jobs
        self._runner = JobRunner()

    async def start(self) -> None:
        """Recovers every log and loads groups and transactions, then starts the jobs."""
        await self.broker.start()
        self._runner.start(self._jobs(self.broker))

    async def stop(self) -> None:
        """Cancels the jobs, waits for them to end, then flushes and closes the stores."""
        await self._runner.stop()
        await self.broker.close()
