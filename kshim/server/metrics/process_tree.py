"""The broker's process and its children (the full-data views' worker) as one: resident
memory, CPU time, open descriptors and processes, read from Linux's /proc at each scrape.

prometheus_client's ProcessCollector counts only the process it runs in; what an operator
sizes a machine by is the whole tree. Runs in the scrape's thread: it reads no broker state.
Where /proc is missing (not Linux), it yields nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_PROC = Path("/proc")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ProcessTreeCollector(Collector):
    def __init__(self, data_dir: str, pid: int | None = None) -> None:
        self._pid = os.getpid() if pid is None else pid
        self._data_dir = data_dir

    def collect(self) -> Iterator[Metric]:
        yield from self._disk()
        if not _PROC.is_dir():
            return
        rss = cpu = fds = 0.0
        pids = tree(self._pid)
        for pid in pids:
            with contextlib.suppress(OSError, ValueError, IndexError):  # exited meanwhile
                fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
                cpu += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
                rss += int(fields[21]) * _PAGE_BYTES
                fds += len(os.listdir(_PROC / str(pid) / "fd"))
        yield _gauge(
            "kshim_process_tree_resident_memory_bytes",
            "Resident memory of the broker and its child processes",
            rss,
        )
        cpu_family = CounterMetricFamily(
            "kshim_process_tree_cpu_seconds",
            "User and system CPU time of the broker and its child processes",
        )
        cpu_family.add_metric([], cpu)
        yield cpu_family
        yield _gauge(
            "kshim_process_tree_open_fds",
            "Open file descriptors of the broker and its child processes",
            fds,
        )
        yield _gauge(
            "kshim_process_tree_processes",
            "The broker's process and its child processes",
            len(pids),
        )

    def _disk(self) -> Iterator[Metric]:
        with contextlib.suppress(OSError):  # the directory is gone: nothing to say
            usage = shutil.disk_usage(self._data_dir)
            yield _gauge(
                "kshim_data_dir_free_bytes",
                "Free bytes on the file system of the data directory",
                usage.free,
            )
            yield _gauge(
                "kshim_data_dir_size_bytes",
                "Size of the file system of the data directory",
                usage.total,
            )


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux's /proc/<pid>/task/<tid>/children)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in (_PROC / str(current) / "task").iterdir():
                queue += [int(child) for child in (task / "children").read_text().split()]
    return found


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
