"""The one seam through which the store touches files.

Every open, write, fsync, read, truncate and delete of log data goes through
a ``FileSystem``, so tests can substitute one that forgets unsynced writes
(LevelDB's fault-injection approach). All methods block: call them off the
event loop.
"""

from __future__ import annotations

import mmap
import os
import shutil
from typing import Protocol

from kshim.storage.interface import FileRegion


class FileSystem(Protocol):
    def open_append(self, path: str) -> int: ...
    def open_read(self, path: str) -> int: ...
    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None: ...
    def fsync(self, descriptor: int) -> None: ...
    def fsync_directory(self, path: str) -> None: ...
    def pread(self, descriptor: int, length: int, position: int) -> bytes: ...
    def region(self, descriptor: int, length: int, position: int) -> bytes | FileRegion: ...
    def size(self, path: str) -> int: ...
    def exists(self, path: str) -> bool: ...
    def map_file(self, path: str) -> bytes | mmap.mmap: ...
    def truncate(self, path: str, length: int) -> None: ...
    def remove(self, path: str) -> None: ...
    def list_directory(self, path: str) -> list[str]: ...
    def make_directory(self, path: str) -> None: ...
    def remove_directory(self, path: str) -> None: ...
    def close(self, descriptor: int) -> None: ...


class OsFileSystem:
    """The real filesystem through ``os`` calls."""

    def open_append(self, path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

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

    def fsync_directory(self, path: str) -> None:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        return os.pread(descriptor, length, position)

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

    def list_directory(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def make_directory(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove_directory(self, path: str) -> None:
        """Removes the directory and everything in it; a missing one is no error."""
        shutil.rmtree(path, ignore_errors=True)

    def close(self, descriptor: int) -> None:
        os.close(descriptor)
