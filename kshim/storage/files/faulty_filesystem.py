"""A FileSystem that fails or slows down on demand, around any other FileSystem.

LevelDB's fault-injection environment (``FaultInjectionTestEnv``) both drops unsynced
data and makes writes and syncs fail; the dropping is simulated_filesystem.py's, this is
the failing: from ``fail_writes``/``fail_syncs`` on, every write or every sync raises the
``OSError`` a full or broken disk gives (``ENOSPC``, ``EIO``) until ``heal``, and
``fsync_delay_s`` makes every sync take that much longer (a slow or overloaded disk).
Wrapped around a SimulatedFileSystem, what a power cut leaves after the fault can then be
checked too. Thread-safe: the store calls it from worker threads while a test, on the
event loop, changes what it injects.
"""

from __future__ import annotations

import collections
import mmap
import os
import threading
import time
from collections.abc import Collection

from kshim.storage.files.filesystem import FileSystem
from kshim.storage.interface import FileRegion

WRITE, SYNC = "write", "sync"  # the kinds of fault counted in ``injected``


class FaultyFileSystem:
    """Delegates every call to ``inner``, failing or delaying writes and syncs as told."""

    def __init__(self, inner: FileSystem) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._errors: dict[str, int] = {}  # the errno each write or sync raises, by kind
        self.fsync_delay_s = 0.0  # each sync sleeps this long before it is attempted
        self.injected: collections.Counter[str] = collections.Counter()  # faults, by kind
        self.sync_attempts = 0  # every sync called, failed or not

    @property
    def sync_count(self) -> int:
        """The inner filesystem's syncs done (a failed one never reaches it)."""
        return self._inner.sync_count

    @sync_count.setter
    def sync_count(self, value: int) -> None:  # the protocol's attribute is writable
        self._inner.sync_count = value

    # -- what to inject (any thread) -----------------------------------------------------

    def fail_writes(self, error_number: int) -> None:
        """From now on every ``write``, ``allocate`` and opening for writes raises
        ``OSError(error_number)``."""
        with self._lock:
            self._errors[WRITE] = error_number

    def fail_syncs(self, error_number: int) -> None:
        """From now on every fsync, directory fsync and ``sync_all`` raises the error."""
        with self._lock:
            self._errors[SYNC] = error_number

    def heal(self) -> None:
        """Stops failing writes and syncs (``fsync_delay_s`` stays as it is)."""
        with self._lock:
            self._errors.clear()

    def _check_write(self) -> None:
        self._raise_injected(WRITE)

    def _check_sync(self) -> None:
        with self._lock:
            self.sync_attempts += 1
            delay_s = self.fsync_delay_s
        if delay_s > 0:
            time.sleep(delay_s)  # a worker thread's (or an inline round's) slow disk
        self._raise_injected(SYNC)

    def _raise_injected(self, kind: str) -> None:
        """Raises the error injected for ``kind`` (WRITE, SYNC), if any, and counts it."""
        with self._lock:
            error_number = self._errors.get(kind)
            if error_number is not None:
                self.injected[kind] += 1
        if error_number is not None:
            raise OSError(error_number, os.strerror(error_number))

    # -- writes and syncs: checked, then delegated ---------------------------------------

    def open_append(self, path: str) -> int:
        self._check_write()
        return self._inner.open_append(path)

    def open_write(self, path: str, position: int) -> int:
        self._check_write()
        return self._inner.open_write(path, position)

    def allocate(self, descriptor: int, size: int) -> None:
        self._check_write()
        self._inner.allocate(descriptor, size)

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        self._check_write()
        self._inner.write(descriptor, data)

    def fsync(self, descriptor: int) -> None:
        self._check_sync()
        self._inner.fsync(descriptor)

    def fsync_directory(self, path: str) -> None:
        self._check_sync()
        self._inner.fsync_directory(path)

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        self._check_sync()
        self._inner.sync_all(paths, directories)

    # -- everything else: delegated as it is ---------------------------------------------

    def open_read(self, path: str) -> int:
        return self._inner.open_read(path)

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        return self._inner.pread(descriptor, length, position)

    def read_file(self, path: str) -> bytes:
        return self._inner.read_file(path)

    def region(self, descriptor: int, length: int, position: int) -> bytes | FileRegion:
        return self._inner.region(descriptor, length, position)

    def size(self, path: str) -> int:
        return self._inner.size(path)

    def exists(self, path: str) -> bool:
        return self._inner.exists(path)

    def map_file(self, path: str) -> bytes | mmap.mmap:
        return self._inner.map_file(path)

    def truncate(self, path: str, length: int) -> None:
        self._inner.truncate(path, length)

    def remove(self, path: str) -> None:
        self._inner.remove(path)

    def rename(self, source: str, target: str) -> None:
        self._inner.rename(source, target)

    def list_directory(self, path: str) -> list[str]:
        return self._inner.list_directory(path)

    def make_directory(self, path: str) -> None:
        self._inner.make_directory(path)

    def remove_directory(self, path: str) -> None:
        self._inner.remove_directory(path)

    def close(self, descriptor: int) -> None:
        self._inner.close(descriptor)


# Checked by mypy: it can stand in wherever the store takes a FileSystem.
_FAULTY: type[FileSystem] = FaultyFileSystem
