"""Progress of long work (recovering every log at start, a benchmark's runs): a line every
few seconds with the share done and the rate, and one when it ends; nothing for work that
ends before the first line is due, so a quick start says nothing.

Lines go to a logger (the broker's log) or to a stream; on a terminal the stream's line is
redrawn in place as a bar. Pure bookkeeping on the clock: callers call ``advance`` as they
go, from any one thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 30

# Told each line and the share done, None with the closing line.
Say = Callable[[str, float | None], None]


class Progress:
    def __init__(
        self,
        what: str,
        total: int,
        unit: str,
        say: Say,
        interval_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.done = 0
        self._say = say
        self._interval_s = interval_s
        self._clock = clock
        self._started = self._last = clock()
        self.said = False  # whether any line was said (then the end is said too)

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = self._clock()
        if now - self._last >= self._interval_s:
            self._last = now
            self.said = True
            self._say(self.line(now), self.share)

    @property
    def share(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 1.0

    def line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        share = self.share
        return (
            f"{self.what}: {share:.0%} ({self.done:,} of {self.total:,} {self.unit}, "
            f"{_rate(self.done / elapsed)} {self.unit}/s)"
        )

    def finish(self) -> None:
        """Says how long it took, if any progress line was said."""
        if self.said:
            elapsed = self._clock() - self._started
            self._say(f"{self.what}: done, {self.done:,} {self.unit} in {elapsed:.1f} s", None)


def _rate(per_second: float) -> str:
    """Whole numbers from 10 a second on, two significant digits below (0.25 samples/s)."""
    return f"{per_second:,.0f}" if per_second >= 10 else f"{per_second:.2g}"


def to_log(logger: logging.Logger) -> Say:
    return lambda line, _: logger.info("%s", line)


def to_stream(stream: TextIO) -> Say:
    """Plain lines, or on a terminal one line redrawn as a bar."""
    if not stream.isatty():
        return lambda line, _: print(line, file=stream, flush=True)

    def redraw(line: str, share: float | None) -> None:
        filled = round((1.0 if share is None else share) * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        end = "\n" if share is None else ""
        print(f"\r[{bar}] {line}\x1b[K", end=end, file=stream, flush=True)

    return redraw
