"""When a background job's work runs: every period, again at once while it is busy, or
when woken. Each function runs until cancelled; the work itself is its feature's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kshim.broker.clock import monotonic_ms

# A turn of a woken job returns how long to wait for a wake-up before the next turn, in
# seconds: 0 for the next turn at once, None for no limit.
Turn = Callable[[], Awaitable[float | None]]


@dataclass(frozen=True, slots=True)
class OnFailure:
    """What a failed pass says before the job goes on: ``message`` with the traceback, by
    the feature's logger ``log``, so the line names the feature."""

    log: logging.Logger
    message: str

    def report(self) -> None:
        """Logs the exception being handled (call it in an ``except`` block)."""
        self.log.exception(self.message)


@dataclass(frozen=True, slots=True)
class Tick:
    """Work a woken job also does every ``period_s`` seconds, whether woken or not."""

    period_s: float
    run: Callable[[], Awaitable[None]]


async def every(
    period_s: float, work: Callable[[], Awaitable[object]], on_failure: OnFailure | None = None
) -> None:
    """Waits ``period_s``, runs ``work``, and so on. A failed pass is reported by
    ``on_failure`` and the next comes a period later; without ``on_failure`` the failure
    ends the job (its supervisor logs it and starts the job again)."""
    while True:
        await asyncio.sleep(period_s)
        try:
            await work()
        except Exception:
            if on_failure is None:
                raise
            on_failure.report()


async def while_busy(
    work: Callable[[], Awaitable[object]], backoff_s: float, on_failure: OnFailure
) -> None:
    """Runs ``work`` again at once after a pass that did something (returned a true
    value), and ``backoff_s`` after one that did nothing or failed (reported by
    ``on_failure``)."""
    while True:
        try:
            busy = bool(await work())
        except Exception:
            on_failure.report()
            busy = False
        await asyncio.sleep(0 if busy else backoff_s)


async def when_woken(
    wake_up: asyncio.Event,
    turn: Turn,
    tick: Tick | None = None,
    monotonic: Callable[[], int] = monotonic_ms,
) -> None:
    """Runs ``turn`` at once, then again whenever ``wake_up`` is set or the wait the last
    turn asked for is over. With ``tick``, ``tick.run`` comes before the first turn and
    before the first one after each ``tick.period_s`` (on the ``monotonic`` clock, in ms),
    and no wait lasts past it. A wake-up during a turn is kept for the next."""
    next_tick_ms = monotonic()
    while True:
        wake_up.clear()
        if tick is not None and monotonic() >= next_tick_ms:
            next_tick_ms = monotonic() + round(tick.period_s * 1000)
            await tick.run()
        wait_s = await turn()
        if tick is not None:
            until_tick_s = max(next_tick_ms - monotonic(), 0) / 1000
            wait_s = until_tick_s if wait_s is None else min(wait_s, until_tick_s)
        if wait_s == 0:
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake_up.wait(), wait_s)
