"""Background jobs run as supervised tasks, as Kafka runs its scheduler's.

A job that fails is logged once with its traceback and started again after a pause, so
one broken job never stops the others; ``stop`` cancels every task and waits for each.
Every task's end is looked at when it happens, so none ends with an exception nobody
retrieved (asyncio would otherwise report it only when the task is collected).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)
RESTART_DELAY_S = 1.0


@dataclass(frozen=True, slots=True)
class Job:
    """A background job: ``run`` works until cancelled, or returns when it has nothing to
    do (its feature turned off). Called again after a failure, so it starts afresh."""

    name: str
    run: Callable[[], Awaitable[None]]


async def supervise(job: Job) -> None:
    """Runs ``job`` until it returns or is cancelled, starting it again after a pause
    whenever it fails: background work must outlive a bug in one pass of it."""
    while True:
        try:
            await job.run()
            log.debug("background job %s done", job.name)
            return
        except Exception:
            if _being_cancelled():
                raise  # failed while stopping: ends the task (logged by ``_ended``)
            log.exception("background job %s failed; starting it again", job.name)
        await asyncio.sleep(RESTART_DELAY_S)


class JobRunner:
    """Starts jobs as tasks and ends them. Event-loop thread only."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, jobs: Iterable[Job]) -> None:
        """Starts each job in a task named after it."""
        for job in jobs:
            task = asyncio.create_task(supervise(job), name=job.name)
            task.add_done_callback(_ended)
            self._tasks.append(task)

    async def stop(self) -> None:
        """Cancels every job and returns once all have ended."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _ended(task: asyncio.Task[None]) -> None:
    # What escapes ``supervise``: a BaseException (not an Exception), or an error raised
    # while the job was being cancelled.
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("background job %s ended", task.get_name(), exc_info=error)
