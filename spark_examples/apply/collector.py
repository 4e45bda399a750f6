"""Python's cyclic garbage collector held off while a micro-batch is read and applied.

A batch of 20,000 changes makes a few hundred thousand short-lived containers (the records,
each decoded row's dicts and tuples, the column lists) and frees them by reference counting
when the batch ends. Meanwhile the collector runs a pass every 700 new containers (CPython's
default threshold) and, every tenth and hundredth time, walks the older generations too,
each pass visiting containers that are all still in use: measured on the sink alone
(benchmarks/apply_sink.py's records, 80,000 changes in batches of 20,000, Python 3.11), a
batch cost 18.0 µs a change with the collector on and 13.1 with it off on DuckDB, 16.2 and
11.1 on SQLite. Python's documentation allows disabling it where a program makes no
reference cycles ("Since the collector supplements the reference counting already used in
Python, you can disable the collector if you are sure your program does not create
reference cycles", the ``gc`` module); the sink makes none on its normal path, and whatever
an error path leaves (an exception's traceback) is collected once the batch ends.

The collector's switch is the process's, and the Spark job reads a batch on one thread while
it writes the previous one on another (pipelined.py): so the pauses are counted, and the
collector comes back, if it was on, when the last one ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """Holds the cyclic collector off for the block (reference counting still frees)."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
