"""Progress lines of long work (kshim/progress.py): nothing for quick work, the share and
the rate every interval, a closing line, and a bar redrawn in place on a terminal."""

from __future__ import annotations

import io

from kshim.progress import Progress, to_stream


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_quick_work_says_nothing() -> None:
    said: list[tuple[str, float | None]] = []
    clock = Clock()
    progress = Progress("copying", 10, "files", lambda *line: said.append(line), 2.0, clock)
    for _ in range(10):
        clock.now += 0.1
        progress.advance()
    progress.finish()
    assert said == []


def test_a_line_every_interval_then_a_closing_line() -> None:
    said: list[tuple[str, float | None]] = []
    clock = Clock()
    progress = Progress("copying", 400, "files", lambda *line: said.append(line), 2.0, clock)
    for _ in range(4):
        clock.now += 1.0
        progress.advance(100)
    progress.finish()
    assert said == [
        ("copying: 50% (200 of 400 files, 100 files/s)", 0.5),
        ("copying: 100% (400 of 400 files, 100 files/s)", 1.0),
        ("copying: done, 400 files in 4.0 s", None),
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_off_a_terminal_and_a_bar_on_one() -> None:
    plain = io.StringIO()
    to_stream(plain)("copying: 50% (1 of 2 files, 1 files/s)", 0.5)
    assert plain.getvalue() == "copying: 50% (1 of 2 files, 1 files/s)\n"
    terminal = Terminal()
    say = to_stream(terminal)
    say("copying: 50% (1 of 2 files, 1 files/s)", 0.5)
    say("copying: done, 2 files in 2.0 s", None)
    first, second = terminal.getvalue().split("\r")[1:]
    assert first.startswith("[" + "#" * 15 + "." * 15 + "] copying: 50%")
    assert not first.endswith("\n") and second.endswith("\n")
    assert second.startswith("[" + "#" * 30 + "] copying: done")


def test_slow_work_says_its_rate_in_fractions() -> None:
    said: list[tuple[str, float | None]] = []
    clock = Clock()
    progress = Progress("benchmarks", 12, "samples", lambda *line: said.append(line), 0.0, clock)
    clock.now += 8.0
    progress.advance()
    assert said == [("benchmarks: 8% (1 of 12 samples, 0.12 samples/s)", 1 / 12)]
