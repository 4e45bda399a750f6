"""An in-memory FileSystem that can lose power.

It tracks, per file, what is durable (covered by an fsync) apart from what
was merely written, and, per directory, which names are durable (covered by
a directory fsync). ``after_power_loss`` returns the filesystem a machine
would find on reboot: only durable names, each file holding its durable
bytes plus, optionally, a random prefix of the unsynced tail (a torn write). Space a
file ``allocate``s reads as zeros without being stored; a power loss keeps the size
synced last.
This is LevelDB's fault-injection approach, used to test that every
acknowledged batch survives. Thread-safe: the store calls it from workers.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Collection
from dataclasses import dataclass, field


@dataclass(slots=True)
class _File:
    current: bytearray = field(default_factory=bytearray)
    durable: bytearray = field(default_factory=bytearray)
    # The size ``allocate`` extended the file to; the zeros past ``current`` are not stored.
    allocated: int = 0
    durable_allocated: int = 0

    def size(self) -> int:
        return max(len(self.current), self.allocated)

    def read(self, position: int, length: int) -> bytes:
        end = min(position + length, self.size())
        data = bytes(self.current[position:end])
        return data + bytes(max(end - max(position, len(self.current)), 0))

    def write_at(self, position: int, data: bytes) -> None:
        if position > len(self.current):
            self.current += bytes(position - len(self.current))
        self.current[position : position + len(data)] = data

    def synced(self) -> None:
        self.durable = bytearray(self.current)
        self.durable_allocated = self.allocated


class SimulatedFileSystem:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}
        self._durable_names: set[str] = set()
        self._directories: set[str] = set()
        self._descriptors: dict[int, str] = {}
        self._positions: dict[int, int] = {}  # where the next write goes, unless appending
        self._next_descriptor = 3
        self.sync_count = 0

    def _open(self, path: str, create: bool) -> int:
        with self._lock:
            if path not in self._files:
                if not create:
                    raise FileNotFoundError(path)
                self._files[path] = _File()
            descriptor = self._next_descriptor
            self._next_descriptor += 1
            self._descriptors[descriptor] = path
            return descriptor

    def open_append(self, path: str) -> int:
        return self._open(path, create=True)

    def open_write(self, path: str, position: int) -> int:
        descriptor = self._open(path, create=True)
        with self._lock:
            self._positions[descriptor] = position
        return descriptor

    def allocate(self, descriptor: int, size: int) -> None:
        with self._lock:
            handle = self._files[self._descriptors[descriptor]]
            handle.allocated = max(handle.allocated, size)

    def open_read(self, path: str) -> int:
        return self._open(path, create=False)

    def write(self, descriptor: int, data: list[bytes | memoryview]) -> None:
        with self._lock:
            handle = self._files[self._descriptors[descriptor]]
            joined = b"".join(data)
            position = self._positions.get(descriptor)
            if position is None:  # appending: after the allocated zeros too
                handle.write_at(handle.size(), joined)
            else:
                handle.write_at(position, joined)
                self._positions[descriptor] = position + len(joined)

    def fsync(self, descriptor: int) -> None:
        with self._lock:
            self._files[self._descriptors[descriptor]].synced()
            self.sync_count += 1

    def fsync_directory(self, path: str) -> None:
        with self._lock:
            self._sync_names(path)
            self.sync_count += 1

    def sync_all(self, paths: Collection[str], directories: Collection[str]) -> None:
        """Exactly the files and directories named become durable (a real syncfs does
        more), so that a caller who forgets one loses it here."""
        with self._lock:
            for path in paths:
                self._files[path].synced()
            for directory in directories:
                self._sync_names(directory)
            self.sync_count += 1

    def _sync_names(self, directory: str) -> None:
        in_directory = {name for name in self._durable_names if os.path.dirname(name) == directory}
        self._durable_names -= in_directory
        self._durable_names |= {name for name in self._files if os.path.dirname(name) == directory}

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        with self._lock:
            return self._files[self._descriptors[descriptor]].read(position, length)

    def read_file(self, path: str) -> bytes:
        with self._lock:
            handle = self._files[path]
            return handle.read(0, handle.size())

    def region(self, descriptor: int, length: int, position: int) -> bytes:
        """No real descriptors here: the bytes themselves."""
        return self.pread(descriptor, length, position)

    def exists(self, path: str) -> bool:
        with self._lock:
            return path in self._files

    def map_file(self, path: str) -> bytes:
        return self.read_file(path)

    def size(self, path: str) -> int:
        with self._lock:
            return self._files[path].size()

    def truncate(self, path: str, length: int) -> None:
        with self._lock:
            handle = self._files[path]
            del handle.current[length:]
            handle.allocated = min(handle.allocated, length)

    def remove(self, path: str) -> None:
        with self._lock:
            del self._files[path]

    def rename(self, source: str, target: str) -> None:
        """The new name is durable once its directory is synced; until then a power loss
        leaves neither name (stricter than POSIX, which keeps one of the two)."""
        with self._lock:
            self._files[target] = self._files.pop(source)
            self._durable_names.discard(target)

    def list_directory(self, path: str) -> list[str]:
        with self._lock:
            names = [name for name in self._files if os.path.dirname(name) == path]
        return sorted(os.path.basename(name) for name in names)

    def make_directory(self, path: str) -> None:
        with self._lock:
            self._directories.add(path)

    def remove_directory(self, path: str) -> None:
        """Forgets the directory and every file under it, durably (as if synced)."""
        prefix = path.rstrip("/") + "/"
        with self._lock:
            for name in [name for name in self._files if name.startswith(prefix)]:
                del self._files[name]
            self._durable_names = {
                name for name in self._durable_names if not name.startswith(prefix)
            }
            self._directories = {
                name for name in self._directories if name != path and not name.startswith(prefix)
            }

    def close(self, descriptor: int) -> None:
        with self._lock:
            self._descriptors.pop(descriptor, None)
            self._positions.pop(descriptor, None)

    def after_power_loss(self, rng: random.Random | None = None) -> SimulatedFileSystem:
        """Returns what survives a power cut now: durable names and bytes (plus a
        random prefix of each unsynced tail when ``rng`` is given)."""
        survivor = SimulatedFileSystem()
        with self._lock:
            survivor._directories = set(self._directories)
            for name in self._durable_names & self._files.keys():
                handle = self._files[name]
                content = bytearray(handle.durable)
                unsynced = handle.current[len(handle.durable) :]
                if rng is not None and handle.current.startswith(handle.durable) and unsynced:
                    content += unsynced[: rng.randrange(len(unsynced) + 1)]
                allocated = handle.durable_allocated
                survivor._files[name] = _File(
                    bytearray(content), bytearray(content), allocated, allocated
                )
            survivor._durable_names = set(survivor._files)
        return survivor
