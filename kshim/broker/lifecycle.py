"""A broker from start to stop: its state loaded, its background work run and ended in order.

The background jobs are what Kafka runs on its scheduler threads: log
retention, the log cleaner (compaction), the group coordinator's timers and
offset expiry, the review and expiry of transactions, the retries of transaction
markers that could not be written (Kafka's TransactionMarkerChannelManager), the
applier that keeps every full-data view current, and delayed delivery's reader and
dispatcher.
Each runs as one supervised task: a job that fails is logged once and started
again after a pause, so no task ever ends with an exception nobody retrieves
and one broken job never stops the others.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from kshim.broker.alarms.checks import run_alarm_checks
from kshim.broker.broker import Broker
from kshim.broker.delay.runner import run_delays
from kshim.broker.full_view.applier import run_full_view
from kshim.broker.groups.maintenance import run_group_coordinator
from kshim.broker.log_cleaner import run_log_cleaner
from kshim.broker.retention import run_retention

log = logging.getLogger(__name__)
RESTART_DELAY_S = 1.0

Job = Callable[[Broker], Awaitable[None]]


def _retention(broker: Broker) -> Awaitable[None]:
    interval_s = broker.config.get_int("log.retention.check.interval.ms") / 1000
    return run_retention(broker, interval_s)


def _review(broker: Broker) -> Awaitable[None]:
    return broker.reviewer.run()


def _transaction_markers(broker: Broker) -> Awaitable[None]:
    return broker.transactions.run_marker_retries()


async def _alarm_webhook(broker: Broker) -> None:
    if broker.webhook is not None:
        await broker.webhook.run()


BACKGROUND_JOBS: dict[str, Job] = {
    "alarm checks": run_alarm_checks,
    "alarm webhook": _alarm_webhook,
    "log retention": _retention,
    "log cleaner": run_log_cleaner,
    "group coordinator": run_group_coordinator,
    "transaction review": _review,
    "transaction markers": _transaction_markers,
    "full-data views": run_full_view,
    "delayed delivery": run_delays,
}


async def supervise(name: str, job: Callable[[], Awaitable[None]]) -> None:
    """Runs ``job`` until it returns or is cancelled, starting it again after a pause
    whenever it fails: background work must outlive a bug in one pass of it."""
    while True:
        try:
            await job()
            log.debug("background job %s done", name)
            return
        except Exception:
            log.exception("background job %s failed; starting it again", name)
        await asyncio.sleep(RESTART_DELAY_S)


class BrokerRunner:
    """Owns a broker's background tasks: ``start`` loads the broker and starts them,
    ``stop`` ends them and closes the broker's stores. Event-loop thread only."""

    def __init__(self, broker: Broker, jobs: dict[str, Job] | None = None) -> None:
        self.broker = broker
        self._jobs = BACKGROUND_JOBS if jobs is None else jobs
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Recovers every log and loads groups and transactions, then starts the jobs."""
        await self.broker.start()
        for name, job in self._jobs.items():
            work = functools.partial(job, self.broker)
            self._tasks.append(asyncio.create_task(supervise(name, work), name=name))

    async def stop(self) -> None:
        """Cancels the jobs, waits for them to end, then flushes and closes the stores."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.broker.close()
