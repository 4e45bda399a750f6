"""The background jobs' runner and schedules (kshim/broker/jobs/): a failing job is logged
and started again, none ends with an exception nobody retrieved, stop ends them all; each
schedule runs its work when it says, on a fake monotonic clock where it reads one."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from kshim.broker.jobs import runner
from kshim.broker.jobs.runner import Job, JobRunner, supervise
from kshim.broker.jobs.schedules import OnFailure, Tick, every, when_woken, while_busy

RUNNER_LOG = "kshim.broker.jobs.runner"
FEATURE_LOG = logging.getLogger("tests.feature")
WAIT_S = 5.0


class Fatal(BaseException):
    """What no job catches: escapes the supervisor and ends the task."""


@pytest.fixture(autouse=True)
def no_restart_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "RESTART_DELAY_S", 0)


@contextmanager
def unretrieved_exceptions() -> Iterator[list[dict[str, Any]]]:
    """What the event loop reports of tasks collected with an exception nobody retrieved."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        yield reported
    finally:
        gc.collect()  # a task's unretrieved exception is reported when it is collected
        loop.set_exception_handler(previous)


@asynccontextmanager
async def running(*jobs: Job) -> AsyncIterator[JobRunner]:
    job_runner = JobRunner()
    job_runner.start(jobs)
    try:
        yield job_runner
    finally:
        await asyncio.wait_for(job_runner.stop(), WAIT_S)


def failures(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if text in record.getMessage()]


# == the runner ==============================================================================


async def test_a_failing_job_is_logged_and_started_again(caplog: pytest.LogCaptureFixture) -> None:
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError(f"pass {runs} broke")

    with caplog.at_level(logging.ERROR, RUNNER_LOG):
        await asyncio.wait_for(supervise(Job("flaky", flaky)), WAIT_S)
    assert runs == 3
    logged = failures(caplog, "background job flaky failed; starting it again")
    assert len(logged) == 2
    assert all(record.exc_info is not None for record in logged)


async def test_a_job_that_ends_with_an_exception_is_logged_and_its_exception_retrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fatal() -> None:
        raise Fatal("no way on")

    with unretrieved_exceptions() as reported, caplog.at_level(logging.ERROR, RUNNER_LOG):
        async with running(Job("fatal", fatal)):
            for _ in range(100):  # the task ends at its first step
                await asyncio.sleep(0)
            [ended] = failures(caplog, "background job fatal ended")
            assert ended.exc_info is not None and isinstance(ended.exc_info[1], Fatal)
    assert reported == []


async def test_a_job_failing_as_it_is_cancelled_still_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = asyncio.Event()
    runs = 0

    async def stubborn() -> None:
        nonlocal runs
        runs += 1
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            if runs == 1:  # started again, it would wait for ever: stop would never return
                raise RuntimeError("cleanup broke")

    with unretrieved_exceptions() as reported, caplog.at_level(logging.ERROR, RUNNER_LOG):
        async with running(Job("stubborn", stubborn)):
            await asyncio.wait_for(started.wait(), WAIT_S)
    [ended] = failures(caplog, "background job stubborn ended")
    assert ended.exc_info is not None and isinstance(ended.exc_info[1], RuntimeError)
    assert failures(caplog, "starting it again") == []
    assert runs == 1
    assert reported == []


async def test_stop_cancels_every_job() -> None:
    started = [asyncio.Event() for _ in range(3)]
    cancelled: list[str] = []

    def waiting(name: str, event: asyncio.Event) -> Job:
        async def run() -> None:
            event.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(name)
                raise

        return Job(name, run)

    jobs = [waiting(f"job {index}", event) for index, event in enumerate(started)]
    async with running(*jobs):
        for event in started:
            await asyncio.wait_for(event.wait(), WAIT_S)
    assert sorted(cancelled) == ["job 0", "job 1", "job 2"]
    assert not [task for task in asyncio.all_tasks() if task.get_name().startswith("job ")]


# == the schedules ===========================================================================


async def test_every_reports_a_failed_pass_by_the_features_logger_and_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    passes = 0
    third = asyncio.Event()

    async def work() -> None:
        nonlocal passes
        passes += 1
        if passes == 3:
            third.set()
        if passes == 2:
            raise RuntimeError("second pass broke")

    with caplog.at_level(logging.ERROR, FEATURE_LOG.name):
        task = asyncio.create_task(every(0, work, OnFailure(FEATURE_LOG, "pass failed; again")))
        await asyncio.wait_for(third.wait(), WAIT_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    [logged] = failures(caplog, "pass failed; again")
    assert logged.name == FEATURE_LOG.name and logged.exc_info is not None


async def test_every_without_a_report_leaves_a_failure_to_the_supervisor() -> None:
    async def work() -> None:
        raise RuntimeError("broke")

    with pytest.raises(RuntimeError, match="broke"):
        await asyncio.wait_for(every(0, work), WAIT_S)


async def test_while_busy_goes_on_at_once_and_backs_off_when_idle_or_failed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    results: list[object] = [2, 1, 0, RuntimeError("broke"), 5]
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(seconds: float) -> None:
        pauses.append(seconds)
        await real_sleep(0)

    async def work() -> object:
        result = results.pop(0)
        if isinstance(result, Exception):
            raise result
        if not results:
            raise asyncio.CancelledError
        return result

    monkeypatch.setattr(asyncio, "sleep", recorded_sleep)
    with caplog.at_level(logging.ERROR, FEATURE_LOG.name), pytest.raises(asyncio.CancelledError):
        await while_busy(work, 7.5, OnFailure(FEATURE_LOG, "round failed"))
    assert pauses == [0, 0, 7.5, 7.5]
    assert len(failures(caplog, "round failed")) == 1


async def test_when_woken_turns_on_each_wake_up_and_ticks_by_its_clock() -> None:
    now_ms = 0
    wake_up = asyncio.Event()
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def tick() -> None:
        await seen.put("tick")

    async def turn() -> float | None:
        await seen.put("turn")
        return None  # until woken, or the next tick

    task = asyncio.create_task(when_woken(wake_up, turn, Tick(1.0, tick), lambda: now_ms))
    try:
        assert [await seen.get(), await seen.get()] == ["tick", "turn"]
        wake_up.set()
        assert await asyncio.wait_for(seen.get(), WAIT_S) == "turn"  # no tick: no time passed
        now_ms += 1000
        wake_up.set()
        assert [await seen.get(), await seen.get()] == ["tick", "turn"]
        assert seen.empty()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_when_woken_turns_again_at_once_when_asked_to() -> None:
    wake_up = asyncio.Event()
    waits: list[float | None] = [0, 0, None]
    turns = 0
    done = asyncio.Event()

    async def turn() -> float | None:
        nonlocal turns
        turns += 1
        wait = waits.pop(0)
        if not waits:
            done.set()
        return wait

    task = asyncio.create_task(when_woken(wake_up, turn))
    try:
        await asyncio.wait_for(done.wait(), WAIT_S)
        await asyncio.sleep(0)
        assert turns == 3  # then it sleeps until woken
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
