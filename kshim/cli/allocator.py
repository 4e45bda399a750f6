"""The C allocator in a long-running broker: memory freed while busy is returned once idle.

glibc's malloc serves blocks of 128 KiB and more with mmap and gives them back to the
system on free, but by default it raises that threshold to the size of each mmapped block
freed (up to 32 MiB; "dynamic mmap threshold", mallopt(3)). A broker allocates and frees
such blocks on every large request (frames read whole, batches, spill buffers), so after
its first produce they come from the heap, where freed space between live objects stays
resident. Measured on an idle broker after 200,000 records produced with confluent-kafka
(acks=all): 39 to 48 MB of RSS at 100 B per record and 88 to 221 MB at 1 KiB.

Fixing the threshold at 128 KiB kept that at 38.2 to 39.3 MB, but every large block then
cost an mmap, its page faults and a munmap: broker CPU per record produced rose from 0.38
to 0.54 µs at 100 B and from 2.05 to 3.65 µs at 1 KiB (benchmarks.run, side by side). So
the heap keeps its reuse while the broker is busy, and ``malloc_trim`` hands its free
pages back once the broker has been idle for a moment: a few milliseconds, once per idle
spell, where nothing waits for them.

The dynamic rule also sets the heap's trim threshold to twice the mmap threshold: after
1 MiB frames, 2 MiB. A produce of 1 KiB records (frames of about 1 MB) frees more than that
at the top of the heap every request or so, so glibc gave it back with brk and took it
again for the next request, whose pages were then faulted in and zeroed afresh: 311 brk
calls for 100,000 records, 470 page faults per 1,000 records, 1.7 to 2.1 µs of system CPU
per record. ``hold_heap_while_busy`` fixes both thresholds at the start (mallopt(3); fixing
either turns the dynamic rule off): blocks below MMAP_THRESHOLD_BYTES come from the heap as
the dynamic rule would have them come after a few requests, and up to TRIM_THRESHOLD_BYTES
of free heap stays mapped while busy, so a request reuses the pages of the one before: 4
page faults per 1,000 records, 0.6 to 1.2 µs of system CPU per record. Idle, the trim above
still hands everything back.
"""

from __future__ import annotations

import asyncio
import ctypes
import time
from collections.abc import Callable
from typing import Any

CHECK_INTERVAL_S = 0.25
# mallopt(3)'s parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Above the largest frame part read (kshim.protocol.framing.PART_BYTES, 1 MiB) and a
# produce request as clients send them by default (message.max.bytes, 1 MB); a larger
# block still comes from mmap, and goes back when freed.
MMAP_THRESHOLD_BYTES = 8 << 20
# Twice that, as the dynamic rule pairs them: what the heap keeps mapped while busy.
TRIM_THRESHOLD_BYTES = 16 << 20
# Below this share of one core used over a check interval, the broker counts as idle.
IDLE_CPU_FRACTION = 0.02


def malloc_trim() -> Callable[[], None] | None:
    """A function returning the heap's free pages to the system, or None where the C
    library has no ``malloc_trim`` (it is glibc's)."""
    trim = _c_library_function("malloc_trim", [ctypes.c_size_t])
    if trim is None:
        return None
    return lambda: trim(0)


def hold_heap_while_busy() -> bool:
    """Fixes glibc's mmap and trim thresholds (module docstring); False where the C
    library has no ``mallopt`` or refuses."""
    mallopt = _c_library_function("mallopt", [ctypes.c_int, ctypes.c_int])
    if mallopt is None:
        return False
    # mallopt returns 1 on success, 0 on error.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )


def _c_library_function(name: str, argtypes: list[type]) -> Any | None:
    """``name`` of the C library the interpreter runs on, returning an int; None where that
    library has no such function (it is not glibc)."""
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


async def trim_when_idle(
    trim: Callable[[], None],
    process_time: Callable[[], float] = time.process_time,
    interval_s: float = CHECK_INTERVAL_S,
) -> None:
    """Runs until cancelled: calls ``trim`` once each time the process (every thread of
    it) turns idle after being busy, starting with the start-up that preceded the call."""
    # Start-up is a busy spell: what it freed (compiled code, schema bytes read and packed,
    # recovery's buffers) would otherwise stay resident until the first request.
    busy_since_trim = True
    last = process_time()
    while True:
        await asyncio.sleep(interval_s)
        now = process_time()
        if now - last > interval_s * IDLE_CPU_FRACTION:
            busy_since_trim = True
        elif busy_since_trim:
            trim()
            busy_since_trim = False
            now = process_time()  # the trim's own CPU is not the broker's work
        last = now
