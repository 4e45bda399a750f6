"""One broker per data directory: an exclusive lock on ``.lock``, held for the broker's life.

Two brokers on one directory would each append to the same logs at offsets the other does
not know, and each acknowledge writes the other then overwrites or replays elsewhere.
Kafka refuses this the same way: every log directory holds a ``.lock`` file that the
broker locks with ``FileChannel.tryLock`` at start-up (``LogManager.lockLogDirs``) and a
second broker on it fails with "Failed to acquire lock ... another process or thread is
using this directory".

The lock is ``flock(2)``, not a POSIX record lock (``lockf``): a record lock belongs to the
process, so a second broker in the same process (tests do this) would get it again, and
closing any descriptor of the file would drop it. An ``flock`` belongs to the open file, is
refused to a second open of the same file in any process, and is released by the kernel
when the holder dies (kill -9 included), so a stale ``.lock`` never blocks a restart. The
holder's pid is written into the file so that the refusal can name it.
"""

from __future__ import annotations

import errno
import fcntl
import os

LOCK_FILE_NAME = ".lock"


class DataDirectoryInUse(OSError):
    """Another process (or another broker in this one) holds the directory's lock."""


class DataDirectoryLock:
    """The held lock of one data directory; ``release`` (or process exit) gives it up."""

    def __init__(self, directory: str, descriptor: int) -> None:
        self.directory = directory
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, directory: str) -> DataDirectoryLock:
        """Locks ``directory`` (which must exist) and records this process's pid there.

        Raises DataDirectoryInUse naming the holder when it is locked already, and
        OSError when the lock file cannot be created (a read-only directory, say)."""
        descriptor = os.open(lock_path(directory), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(descriptor)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise DataDirectoryInUse(_in_use_message(directory)) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        return cls(directory, descriptor)

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def release(self) -> None:
        """Unlocks the directory; the ``.lock`` file stays, as Kafka's does."""
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the only descriptor drops the flock
            self._descriptor = None


def lock_path(directory: str) -> str:
    return os.path.join(directory, LOCK_FILE_NAME)


def held_by(directory: str, pid: int) -> bool:
    """Whether process ``pid`` holds ``directory``'s lock now.

    Probes with a shared, non-blocking lock taken and dropped at once: it fails only
    while an exclusive lock is held; the holder is the pid it wrote."""
    try:
        descriptor = os.open(lock_path(directory), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _recorded_pid(directory) == pid
    finally:
        os.close(descriptor)  # drops the probe's own lock when it got one
    return False


def _recorded_pid(directory: str) -> int | None:
    try:
        with open(lock_path(directory), encoding="ascii") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _in_use_message(directory: str) -> str:
    pid = _recorded_pid(directory)
    holder = f"pid {pid}" if pid is not None else "pid unknown"
    return f"data directory {directory} is in use by another kshim ({holder})"
