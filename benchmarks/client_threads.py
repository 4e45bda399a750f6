"""Where a client's time goes: the CPU of each thread of this process over a run.

librdkafka runs each broker connection on a thread of its own (``rdk:broker<N>``: the
protocol, TLS and the socket), beside its main thread and the application's. A run whose
busiest client thread was on a core all the time was paced by that thread, whatever the
broker could do; one whose broker and client threads all had time to spare was paced by
neither's CPU. Read from /proc/self/task (Linux).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TASKS = Path("/proc/self/task")


def thread_cpu_seconds() -> dict[str, float]:
    """User plus system CPU seconds of each live thread of this process, keyed by
    ``<thread id>:<name>``."""
    found = {}
    for task in TASKS.iterdir():
        with contextlib.suppress(OSError):
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            found[f"{task.name}:{name}"] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return found


@dataclass
class ThreadUsage:
    """Each thread's CPU between ``start`` and ``stop``, as a share of one core over that
    time (a thread that started meanwhile counts from zero; one that ended is not seen)."""

    started: float = 0.0
    before: dict[str, float] = field(default_factory=dict)
    cores: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self.before = thread_cpu_seconds()
        self.started = time.perf_counter()

    def stop(self) -> None:
        seconds = time.perf_counter() - self.started
        after = thread_cpu_seconds()
        self.cores = {
            thread: (cpu - self.before.get(thread, 0.0)) / seconds for thread, cpu in after.items()
        }

    def total_cores(self) -> float:
        return sum(self.cores.values())

    def busiest(self) -> tuple[str, float]:
        """(the busiest thread's name, its share of a core); ("", 0) before a stop."""
        if not self.cores:
            return "", 0.0
        thread, cores = max(self.cores.items(), key=lambda item: item[1])
        return thread.split(":", 1)[1], cores
