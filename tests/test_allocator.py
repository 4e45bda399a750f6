"""The broker hands freed heap pages back once each time it turns idle, never while busy,
and keeps what a request freed mapped for the next while busy."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable

from kshim.cli.allocator import malloc_trim, trim_when_idle

# A busy broker's request in a child process: three 1 MiB blocks (frame parts, batches) made
# and freed, 100 times; prints the page faults it took. Under glibc's dynamic thresholds
# the 3 MiB freed at the heap's top is above its trim threshold (2 MiB after 1 MiB blocks),
# so each round gives pages back and faults them in again.
REQUESTS = """
import resource, sys
from kshim.cli.allocator import hold_heap_while_busy
if sys.argv[1] == "hold":
    assert hold_heap_while_busy()
for _ in range(3):  # the dynamic rule's thresholds settle after the first frees
    blocks = [bytearray(1 << 20) for _ in range(3)]
    del blocks
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):
    blocks = [bytearray(1 << 20) for _ in range(3)]
    del blocks
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


async def trims_seen(readings: Callable[[int], float], checks_wanted: int) -> list[int]:
    """Runs trim_when_idle on a fake CPU clock (``readings``: the clock's value at the Nth
    reading, from 1) until it has read the clock ``checks_wanted`` times; returns the
    reading counts at which it trimmed."""
    trims: list[int] = []
    checks = 0
    enough = asyncio.Event()

    def process_time() -> float:
        nonlocal checks
        checks += 1
        if checks >= checks_wanted:
            enough.set()
        return readings(checks)

    task = asyncio.create_task(
        trim_when_idle(lambda: trims.append(checks), process_time, interval_s=0.001)
    )
    await asyncio.wait_for(enough.wait(), timeout=10)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return trims


async def test_trims_once_per_idle_spell_after_busy_ones() -> None:
    # CPU seconds used before each reading of the clock: the start, then busy, idle (trim,
    # and the reading after it), busy, busy, idle (trim), then idle from there on.
    used = [0.0, 0.01, 0.0, 0.0, 0.01, 0.01, 0.0]
    clock = [sum(used[: index + 1]) for index in range(len(used))]
    trims = await trims_seen(lambda n: clock[n - 1] if n <= len(clock) else 1.0, len(used) + 2)
    assert trims == [3, 7]  # the readings that found the process idle after busy ones


def test_malloc_trim_is_callable_on_this_c_library() -> None:
    trim = malloc_trim()
    assert trim is not None  # glibc, where the suite runs
    trim()


async def test_start_up_counts_as_a_busy_spell() -> None:
    """Idle from its first reading on, the broker still trims once: what its start freed."""
    trims = await trims_seen(lambda n: 0.0, 5)
    assert trims == [2]  # the first reading after the start


def page_faults_of_requests(mode: str) -> int:
    command = [sys.executable, "-c", REQUESTS, mode]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_a_busy_heap_keeps_what_a_request_freed_for_the_next() -> None:
    default, held = page_faults_of_requests("default"), page_faults_of_requests("hold")
    # Trimmed each round, 100 rounds fault in hundreds of pages each (48,000 here: 2 of the
    # 3 MiB); held, the rounds reuse the same pages.
    assert default > 20_000, default
    assert held < 2_000, held
