"""Where the view's CPU work runs: a child process (the default) or the broker's threads.

Turning a chunk of ``T`` into view changes and writing them to LMDB costs tens of
microseconds per record in Python. In worker threads that work holds the GIL the event
loop needs, and a lagging view slowed produce to a third of its rate
(benchmarks/full_view.py); a child process has its own interpreter. Both processes open
the same LMDB environment, which LMDB supports (its lock file serialises writers): the
child writes the view, the broker reads it for Fetch.

The child (kshim/broker/child_process.py) is started on the first chunk to apply and
ends with the broker, kill -9 included. It writes only for a parent that holds the data
directory's lock (storage/files/data_directory_lock.py).
"""

from __future__ import annotations

import asyncio
import os
from typing import NamedTuple, Protocol

from kshim.broker.child_process import ChildProcess, Handler
from kshim.broker.full_view.changes import view_changes
from kshim.storage.files.data_directory_lock import held_by
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.transaction_store import AbortedTransaction
from kshim.storage.views.full_view_store import FullViewStore


class ChunkToApply(NamedTuple):
    """One chunk of a partition of ``T``: its stored batches ``data``, the aborted
    transactions among them, the tombstone expiry, and the position after it."""

    topic_partition: TopicPartition
    data: bytes
    aborted: list[AbortedTransaction]
    tombstone_expiry_ms: int
    next_position: int


class ChunkApplier(Protocol):
    async def apply(self, chunk: ChunkToApply) -> None:
        """Applies the chunk's batches to the view and moves the partition's position."""

    def close(self) -> None: ...


class ThreadApplier:
    """In the broker process: decoding and LMDB writes in worker threads."""

    def __init__(self, store: FullViewStore) -> None:
        self._store = store

    async def apply(self, chunk: ChunkToApply) -> None:
        changes = await asyncio.to_thread(
            view_changes, chunk.data, chunk.aborted, chunk.tombstone_expiry_ms
        )
        await asyncio.to_thread(
            self._store.apply, chunk.topic_partition, changes, chunk.next_position
        )

    def close(self) -> None:
        pass


class ProcessApplier:
    """In one child process that owns its own handle on the view's LMDB files."""

    def __init__(self, directory: str, data_dir: str) -> None:
        self._child = ChildProcess(
            f"{__name__}:applying_handler", (directory, data_dir, str(os.getpid()))
        )

    @property
    def started(self) -> bool:
        """Whether the child process was started (it is, on the first chunk to apply)."""
        return self._child.started > 0

    async def apply(self, chunk: ChunkToApply) -> None:
        await asyncio.to_thread(self._child.call, chunk)

    def close(self) -> None:
        """Waits for the chunk in progress, if any, then stops the child."""
        self._child.close()


class NotTheLockHolder(RuntimeError):
    """The child's parent does not hold the data directory's lock (it died, or a second
    broker started the child): the child must not write a view another broker owns."""


def applying_handler(directory: str, data_dir: str, parent_pid: str) -> Handler:
    """The child's handler: each chunk decoded into view changes, written to the view."""
    if not held_by(data_dir, int(parent_pid)):
        raise NotTheLockHolder(f"pid {parent_pid} does not hold the lock of {data_dir}")
    store = FullViewStore(directory)  # the child's own handle, opened once

    def apply(request: object) -> object:
        if not isinstance(request, ChunkToApply):
            raise TypeError(f"a chunk to apply was expected, not {type(request).__name__}")
        changes = view_changes(request.data, request.aborted, request.tombstone_expiry_ms)
        store.apply(request.topic_partition, changes, request.next_position)
        return None

    return apply
