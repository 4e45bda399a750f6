"""CPU work on a core the event loop does not use: one child process fed over a pipe.

Python runs one thread at a time, so decoding records in worker threads takes the core
that Produce and Fetch need (docs/design.md, "Where the CPU goes, and why"); a child
process has an interpreter of its own. The full-data view (full_view/worker.py) and the delay ingest
(delay/chunk_worker.py) both run their work here.

The child is this module run by the same interpreter (``python -m``): spawned, never
forked, because an LMDB environment must not cross a fork and a fork would copy the
broker's memory. It imports a handler factory named ``module:function``, calls it once
with the string arguments it was given, then answers each request read from its standard
input with ``(True, result)``, or ``(False, traceback)`` when the handler raised. Frames
are an unsigned 64-bit big-endian length and a pickle; both ends are this module, over a
pipe only the broker holds. The child ends when its input closes: at ``close``, and when
the broker dies, even by kill -9, since the kernel closes the broker's end of the pipe.

pickle is imported at the first frame, not with this module: a broker imports this module
at start but starts a child only for work worth one, and the module costs 0.4 MB
(measured 2026-11-29).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import IO

CLOSE_TIMEOUT_S = 5.0
_FRAME_LENGTH = struct.Struct(">Q")
# As kshim/cli/serve_command.py formats the broker's own lines: the child writes to the same stderr.
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# What a factory returns: the child's answer to one request.
Handler = Callable[[object], object]


class UnreadableAnswer(EOFError):
    """A frame read from the pipe is not one this module wrote: the pipe is out of step."""


class ChildFailed(RuntimeError):
    """The handler raised in the child, or its factory did; the message holds the
    child's traceback."""


class ChildProcess:
    """Calls a handler in one child process, started at the first call and kept until
    ``close``. Blocking and thread-safe: call from worker threads. A call whose child died
    or whose pipe broke raises OSError or EOFError (UnreadableAnswer included) and stops
    that child: the next call starts another."""

    def __init__(self, factory: str, arguments: Sequence[str] = ()) -> None:
        """``factory``: ``module:function`` taking ``arguments`` and returning the Handler."""
        self._command = [factory, *arguments]
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.started = 0  # children started so far

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running child, if any (read without the lock: a hint)."""
        return self._process

    def call(self, request: object) -> object:
        """The handler's answer to ``request``; raises ChildFailed if it raised."""
        with self._lock:
            try:
                process = self._running()
                _write_frame(_stream(process.stdin), request)
                ok, answer = _answer(_read_frame(_stream(process.stdout)))
            except (OSError, EOFError):
                self._stop()
                raise
        if not ok:
            raise ChildFailed(f"{self._command[0]} failed in the child:\n{answer}")
        return answer

    def close(self) -> None:
        """Ends the child, if one runs, after the call in progress; a later call starts
        another."""
        with self._lock:
            self._stop()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(level), *self._command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            self.started += 1
        return self._process

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                # A broken pipe's buffered bytes cannot be flushed: the child is gone anyway.
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            process.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _stream(stream: IO[bytes] | None) -> IO[bytes]:
    if stream is None:  # never: both pipes are asked for
        raise OSError("the child process has no pipe")
    return stream


def _write_frame(stream: IO[bytes], payload: object) -> None:
    import pickle

    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> object:
    """The next frame's object; raises EOFError at the end of the stream (or within a
    frame), UnreadableAnswer when the frame is not a pickle."""
    import pickle

    head = stream.read(_FRAME_LENGTH.size)
    if len(head) < _FRAME_LENGTH.size:
        raise EOFError("the child process's pipe closed")
    (length,) = _FRAME_LENGTH.unpack(head)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError("the child process's pipe closed within a frame")
    try:
        return pickle.loads(data)
    except pickle.UnpicklingError as error:
        raise UnreadableAnswer(str(error)) from error


def _answer(frame: object) -> tuple[bool, object]:
    if not (isinstance(frame, tuple) and len(frame) == 2 and isinstance(frame[0], bool)):
        raise UnreadableAnswer(f"the child answered a {type(frame).__name__}")
    return frame[0], frame[1]


def serve(handler: Handler, requests: IO[bytes], answers: IO[bytes]) -> None:
    """The child's loop: answers each request until ``requests`` ends."""
    while True:
        try:
            request = _read_frame(requests)
        except EOFError:
            return
        try:
            answer: tuple[bool, object] = (True, handler(request))
        except Exception:
            answer = (False, traceback.format_exc())
        _write_frame(answers, answer)


def _load_handler(factory: str, arguments: Sequence[str]) -> Handler:
    """The factory's handler; if the factory raises, a handler answering every request
    with that traceback, so the broker sees why (the child stays until its input closes)."""
    try:
        module, function = factory.split(":")
        made: Handler = getattr(importlib.import_module(module), function)(*arguments)
        return made
    except Exception:
        failure = traceback.format_exc()

    def failed(request: object) -> object:
        raise ChildFailed(f"starting the child failed:\n{failure}")

    return failed


def main() -> None:
    # The broker stops the child by closing its input; an interrupt meant for the broker's
    # terminal must not kill it first with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    level, factory, *arguments = sys.argv[1:]
    logging.basicConfig(level=level, format=_LOG_FORMAT)
    handler = _load_handler(factory, arguments)
    try:
        serve(handler, sys.stdin.buffer, sys.stdout.buffer)
    except BrokenPipeError:  # the broker died while a request was being answered
        # Python's advice for this case: no second error when stdout is flushed at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
