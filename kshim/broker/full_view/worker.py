"""Where the view's CPU work runs: a child process (the default) or the broker's threads.

Turning a chunk of ``T`` into view changes and writing them to LMDB costs tens of
microseconds per record in Python. In worker threads that work holds the GIL the event
loop needs, and a lagging view slowed produce to a third of its rate
(benchmarks/full_view.py); a child process has its own interpreter. Both processes open
the same LMDB environment, which LMDB supports (its lock file serialises writers): the
child writes the view, the broker reads it for Fetch.

The child is spawned, not forked (an LMDB environment must not cross a fork), on the
first chunk to apply, and exits by itself when the broker dies (kill -9 included): a
watchdog thread compares its parent's pid. It writes only for a parent that holds the
data directory's lock (storage/files/data_directory_lock.py).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kshim.broker.full_view.changes import view_changes
from kshim.storage.files.data_directory_lock import held_by
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.storage.views.full_view_store import FullViewStore

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

PARENT_CHECK_INTERVAL_S = 1.0


class ChunkApplier(Protocol):
    async def apply(
        self,
        topic_partition: TopicPartition,
        data: bytes,
        aborted: Sequence[AbortedTransaction],
        tombstone_expiry_ms: int,
        next_position: int,
    ) -> None:
        """Applies the stored batches ``data`` of the partition and moves its position."""

    def close(self) -> None: ...


class ThreadApplier:
    """In the broker process: decoding and LMDB writes in worker threads."""

    def __init__(self, store: FullViewStore) -> None:
        self._store = store

    async def apply(
        self,
        topic_partition: TopicPartition,
        data: bytes,
        aborted: Sequence[AbortedTransaction],
        tombstone_expiry_ms: int,
        next_position: int,
    ) -> None:
        changes = await asyncio.to_thread(view_changes, data, aborted, tombstone_expiry_ms)
        await asyncio.to_thread(self._store.apply, topic_partition, changes, next_position)

    def close(self) -> None:
        pass


class ProcessApplier:
    """In one spawned child process that owns its own handle on the view's LMDB files."""

    def __init__(self, directory: str, data_dir: str) -> None:
        self._directory = directory
        self._data_dir = data_dir
        self._executor: ProcessPoolExecutor | None = None

    @property
    def started(self) -> bool:
        """Whether the child process was spawned (it is, on the first chunk to apply)."""
        return self._executor is not None

    async def apply(
        self,
        topic_partition: TopicPartition,
        data: bytes,
        aborted: Sequence[AbortedTransaction],
        tombstone_expiry_ms: int,
        next_position: int,
    ) -> None:
        if self._executor is None:
            self._executor = _spawn_executor(self._directory, self._data_dir)
        await asyncio.get_running_loop().run_in_executor(
            self._executor, _apply_in_child, topic_partition, data, list(aborted),
            tombstone_expiry_ms, next_position,
        )  # fmt: skip

    def close(self) -> None:
        """Waits for the chunk in progress, if any, then stops the child."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


def _spawn_executor(directory: str, data_dir: str) -> ProcessPoolExecutor:
    # Imported on the first view to apply: multiprocessing costs about 1.6 MB of RSS that
    # a broker whose views nobody reads would carry for nothing.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_in_child,
        initargs=(directory, data_dir, os.getpid()),
    )


_child_store: FullViewStore | None = None  # the child's own handle, opened once


class NotTheLockHolder(RuntimeError):
    """The child's parent does not hold the data directory's lock (it died, or a second
    broker started the child): the child must not write a view another broker owns."""


def _start_in_child(directory: str, data_dir: str, parent_pid: int) -> None:
    global _child_store
    if not held_by(data_dir, parent_pid):
        raise NotTheLockHolder(f"pid {parent_pid} does not hold the lock of {data_dir}")
    _child_store = FullViewStore(directory)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()


def _exit_when_orphaned(parent_pid: int) -> None:
    # LMDB aborts a write transaction left by a dead process, so exiting at once is safe.
    while os.getppid() == parent_pid:
        threading.Event().wait(PARENT_CHECK_INTERVAL_S)
    os._exit(0)


def _apply_in_child(
    topic_partition: TopicPartition,
    data: bytes,
    aborted: list[AbortedTransaction],
    tombstone_expiry_ms: int,
    next_position: int,
) -> None:
    assert _child_store is not None
    changes = view_changes(data, aborted, tombstone_expiry_ms)
    _child_store.apply(topic_partition, changes, next_position)
