"""The one seam through which the store touches files.

Every open, write, fsync, read, truncate and delete of log data goes through
a ``FileSystem``, so tests can substitute one that forgets unsynced writes
(LevelDB's fault-injection approach). All methods block: call them off the
event loop.
"""

from __future__ import annotations

import errno
import functools
import logging
import mmap
import os
import shutil
from collections.abc import Callable, Collection
from typing import Protocol

from kshim.storage.interface import FileRegion

log = logging.getLogger(__name__)

# Above this many files, one syncfs(2) of the whole filesystem is cheaper than an fsync
# per file: 1,000 small dirty files took 80 ms to fsync one by one and 7 ms to syncfs on
# this project's test machine (and each fsync needs a descriptor of its own).
SYNCFS_MIN_FILES = 16


class FileSystem(Protocol):
    sync_count: int  # fsyncs (of files, directories or whole filesystems) done so far

    def open_append(self, path: str) -> int: ...
    def open_write(self, path: str, position: int) -> int:
        """Opens ``path`` (created if absent) for writes starting at byte ``position``."""
        ...

    def allocate(self, descriptor: int, size: int) -> None:
        """Extends the file to at least ``size`` bytes, the new ones zeros with their disk
        blocks allocated (a later write over them changes no file size)."""
        ...

    def open_read(self, path: str) -> int: ...
    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None: ...
    def fsync(self, descriptor: int) -> None: ...
    def fsync_directory(self, path: str) -> None: ...
    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        """Makes every file's written bytes and every directory's names durable."""
        ...

    def pread(self, descriptor: int, length: int, position: int) -> bytes: ...
    def read_file(self, path: str) -> bytes: ...
    def region(self, descriptor: int, length: int, position: int) -> bytes | FileRegion: ...
    def size(self, path: str) -> int: ...
    def exists(self, path: str) -> bool: ...
    def map_file(self, path: str) -> bytes | mmap.mmap: ...
    def truncate(self, path: str, length: int) -> None: ...
    def remove(self, path: str) -> None: ...
    def rename(self, source: str, target: str) -> None:
        """Replaces ``target`` with ``source`` atomically (durable once the directory is)."""
        ...

    def list_directory(self, path: str) -> list[str]: ...
    def make_directory(self, path: str) -> None: ...
    def remove_directory(self, path: str) -> None: ...
    def close(self, descriptor: int) -> None: ...


class OsFileSystem:
    """The real filesystem through ``os`` calls."""

    def __init__(self) -> None:
        self.sync_count = 0

    def open_append(self, path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def open_write(self, path: str, position: int) -> int:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.lseek(descriptor, position, os.SEEK_SET)
        return descriptor

    def allocate(self, descriptor: int, size: int) -> None:
        """posix_fallocate(3); where the filesystem cannot allocate ahead, nothing (the
        file then grows as it is written, which is correct, only slower to sync)."""
        try:
            os.posix_fallocate(descriptor, 0, size)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise

    def open_read(self, path: str) -> int:
        return os.open(path, os.O_RDONLY)

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        pending = [memoryview(part) for part in data if len(part)]
        while pending:
            written = os.writev(descriptor, pending[:1024])
            while written and pending:
                if written >= len(pending[0]):
                    written -= len(pending.pop(0))
                else:
                    pending[0] = pending[0][written:]
                    written = 0

    def fsync(self, descriptor: int) -> None:
        os.fsync(descriptor)
        self.sync_count += 1

    def fsync_directory(self, path: str) -> None:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        self.sync_count += 1

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        """One syncfs(2) for many files (Linux); an fsync per file and directory otherwise.
        syncfs also writes out other programs' dirty data on the same filesystem, which
        costs time but never correctness."""
        if not paths and not directories:
            return
        syncfs = _syncfs() if len(paths) + len(directories) >= SYNCFS_MIN_FILES else None
        if syncfs is not None:
            anchor = next(iter(directories)) if directories else os.path.dirname(next(iter(paths)))
            descriptor = os.open(anchor, os.O_RDONLY)
            try:
                if syncfs(descriptor) == 0:
                    self.sync_count += 1
                    return
                log.warning("syncfs failed; syncing file by file")
            finally:
                os.close(descriptor)
        for path in paths:
            descriptor = os.open(path, os.O_RDONLY)
            try:
                self.fsync(descriptor)
            finally:
                os.close(descriptor)
        for directory in directories:
            self.fsync_directory(directory)

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        return os.pread(descriptor, length, position)

    def read_file(self, path: str) -> bytes:
        """The whole file."""
        with open(path, "rb", buffering=0) as handle:
            return handle.readall()

    def region(self, descriptor: int, length: int, position: int) -> bytes | FileRegion:
        """A zero-copy handle on the range (a duplicate descriptor, cheap and non-blocking)."""
        return FileRegion(os.dup(descriptor), position, length)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def map_file(self, path: str) -> bytes | mmap.mmap:
        """A read-only memory map of the whole file (page cache, not heap)."""
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return b""  # mmap refuses empty files
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    def truncate(self, path: str, length: int) -> None:
        os.truncate(path, length)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def list_directory(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def make_directory(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove_directory(self, path: str) -> None:
        """Removes the directory and everything in it; a missing one is no error."""
        shutil.rmtree(path, ignore_errors=True)

    def close(self, descriptor: int) -> None:
        os.close(descriptor)


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs(int fd), where the C library has it (Linux since glibc 2.14). Loaded
    on first use: ctypes costs half a megabyte of RSS, and a broker that never syncs many
    files at once never needs it."""
    import ctypes

    try:
        # The running program's own symbols include the C library's (dlopen(NULL)).
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    syncfs: Callable[[int], int] = function
    return syncfs
