"""The open files of every partition log, bounded: a least-recently-used set of descriptors.

A descriptor held open per segment and per index file, as Kafka holds them, takes two
per partition: 20,000 at 10,000 single-partition topics, past the common ``ulimit -n``
of 1,024 near 500 topics. Appends are made durable through the shared write-ahead log
instead (write_ahead_log.py), so a segment file is only written when batches are spilled
to it or indexed, and read when a consumer falls behind the memtable: each can open the
file when it needs it. The cache keeps at most ``capacity`` descriptors
(``kshim.max.open.files``) and closes the least recently used one when a new one would
pass that, as LevelDB's table cache does with its ``max_open_files``.

A descriptor in use (a write or read in progress in some thread) is pinned and never
closed under its user; were every one pinned, the cache would go over its capacity until
they are released rather than fail. Reads sent with sendfile hold a duplicate descriptor
each (``FileRegion``): at most ``region_capacity`` at once, beyond which reads return
bytes, so a fetch of thousands of partitions cannot exhaust descriptors either.

Threads: every method may be called from any thread; ``acquire`` and ``read_chunk`` may
open or read a file (blocking), ``cached_region`` never blocks.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kshim.storage.files.filesystem import FileSystem
from kshim.storage.interface import FileRegion

DEFAULT_CAPACITY = 128
# Duplicate descriptors handed out for zero-copy sends at once. A region is a read of a
# consumer that fell behind the memtable, at most a partition's fetch size: a handful per
# response in practice, and a response at its 50 MiB default limit needs 50 of 1 MiB.
DEFAULT_REGION_CAPACITY = 64


@dataclass(slots=True)
class _Entry:
    descriptor: int
    pins: int = 0
    forgotten: bool = False  # the file was deleted: close once the last user is done


class DescriptorCache:
    """Open descriptors by (path, writable), least recently used first."""

    def __init__(
        self,
        filesystem: FileSystem,
        capacity: int = DEFAULT_CAPACITY,
        region_capacity: int = DEFAULT_REGION_CAPACITY,
    ) -> None:
        self._fs = filesystem
        self._capacity = max(capacity, 1)
        self._region_capacity = region_capacity
        self._entries: OrderedDict[tuple[str, bool], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._live_regions = 0
        self.opened = 0  # files opened so far (a measure of how well the cache fits)

    @property
    def open_count(self) -> int:
        return len(self._entries)

    def acquire(self, path: str, writable: bool) -> int:
        """A descriptor of ``path`` (opened for appending, creating it, when ``writable``),
        pinned until ``release``. Blocks when the file must be opened."""
        key = (path, writable)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                opener = self._fs.open_append if writable else self._fs.open_read
                entry = _Entry(opener(path))
                self._entries[key] = entry
                self.opened += 1
                self._evict()
            else:
                self._entries.move_to_end(key)
            entry.pins += 1
            return entry.descriptor

    def release(self, path: str, writable: bool) -> None:
        with self._lock:
            key = (path, writable)
            entry = self._entries[key]
            entry.pins -= 1
            if entry.pins == 0 and entry.forgotten:
                del self._entries[key]
                self._fs.close(entry.descriptor)
            else:
                self._evict()

    @contextlib.contextmanager
    def using(self, path: str, writable: bool) -> Iterator[int]:
        descriptor = self.acquire(path, writable)
        try:
            yield descriptor
        finally:
            self.release(path, writable)

    def cached_region(self, path: str, length: int, position: int) -> bytes | FileRegion | None:
        """A read of ``length`` bytes at ``position`` of ``path`` if the file is open for
        reading already and a region may be handed out; None otherwise (then call
        ``read_chunk`` in a worker thread). Never blocks: duplicating a descriptor is not
        I/O."""
        with self._lock:
            entry = self._entries.get((path, False))
            if entry is None or entry.forgotten or self._live_regions >= self._region_capacity:
                return None
            self._entries.move_to_end((path, False))
            return self._region(entry.descriptor, length, position)

    def read_chunk(self, path: str, length: int, position: int) -> bytes | FileRegion:
        """A region of the file for a zero-copy send, or its bytes once ``region_capacity``
        regions are out. Blocks (opens or reads the file)."""
        with self.using(path, writable=False) as descriptor, self._lock:
            if self._live_regions < self._region_capacity:
                return self._region(descriptor, length, position)
        return self.pread(path, length, position)

    def pread(self, path: str, length: int, position: int) -> bytes:
        """``length`` bytes at ``position`` of ``path``. Blocks."""
        with self.using(path, writable=False) as descriptor:
            return self._fs.pread(descriptor, length, position)

    def _region(self, descriptor: int, length: int, position: int) -> bytes | FileRegion:
        """Called with the lock held."""
        chunk = self._fs.region(descriptor, length, position)
        if isinstance(chunk, FileRegion):
            self._live_regions += 1
            chunk.on_close = self._region_closed
        return chunk

    def _region_closed(self) -> None:
        with self._lock:
            self._live_regions -= 1

    def forget(self, paths: Iterable[str]) -> None:
        """Closes the descriptors of files about to be deleted (or, for one in use, once
        its user releases it), so that a deleted file's space is not held open."""
        with self._lock:
            for path in paths:
                for writable in (False, True):
                    entry = self._entries.get((path, writable))
                    if entry is None:
                        continue
                    if entry.pins:
                        entry.forgotten = True
                    else:
                        del self._entries[(path, writable)]
                        self._fs.close(entry.descriptor)

    def forget_directory(self, directory: str) -> None:
        """``forget`` for every file under ``directory`` (about to be removed)."""
        prefix = directory.rstrip("/") + "/"
        with self._lock:
            paths = {path for path, _ in self._entries if path.startswith(prefix)}
        self.forget(paths)

    def close(self) -> None:
        """Closes every descriptor (the store is closing: nothing is in use)."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            self._fs.close(entry.descriptor)

    def _evict(self) -> None:
        """Closes least recently used, unpinned descriptors while over capacity. Called
        with the lock held."""
        excess = len(self._entries) - self._capacity
        if excess <= 0:
            return
        victims = []
        for key, entry in self._entries.items():
            if entry.pins == 0:
                victims.append(key)
                if len(victims) == excess:
                    break
        for key in victims:
            self._fs.close(self._entries.pop(key).descriptor)
