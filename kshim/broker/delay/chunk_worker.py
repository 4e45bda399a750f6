"""Filing ``T.delay`` chunks on a core the event loop does not use: a child process that
reads chunk requests (kshim/broker/delay/chunks.py) from its standard input and answers
each with the filed chunk on its standard output.

Decoding a delayed record, reading its headers, packing it and filing it cost the broker
several microseconds of Python each, all under the one interpreter lock that Produce also
needs: while a producer goes flat out, reading into the schedule took more of the event
loop's core than Produce itself (benchmarks/results/README.md, 2026-11-27). The child
holds no state: a request carries what the store said (read position, next seq, topic
id, near buckets), the answer is what the store commits (DelayStore.commit_chunk) in the
broker, under the schedule's lock as before. So exactly-once and recovery do not change:
a chunk the broker did not commit is read again, and a child that dies takes nothing
with it. Frames are an unsigned 64-bit big-endian length, then a pickle; both ends are
this module, over a pipe only the broker holds.

The child is started with the first chunk worth sending (WORKER_MIN_BYTES; a broker
nobody delays much on never starts it) and ends when its standard input closes: at
``close``, or when the broker dies, even by kill -9.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from kshim.broker.delay.chunks import ChunkRequest, file_request
from kshim.storage.schedule.delay_filing import FiledChunk

log = logging.getLogger(__name__)

# Below this a chunk is filed in the broker: a round trip to the child costs about a
# millisecond, and a few records cost less than that to file.
WORKER_MIN_BYTES = 128 << 10
# A child that filed nothing for this long is ended (about 35 MB of RSS back); the next
# large chunk starts another (about 0.3 s of CPU).
WORKER_IDLE_S = 30.0
CLOSE_TIMEOUT_S = 5.0
_FRAME_LENGTH = struct.Struct(">Q")
# As kshim/cli/serve_command.py formats the broker's own lines: the child writes to the same stderr.
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ChunkWorkerError(RuntimeError):
    """Filing raised in the child; the message holds the child's traceback."""


class ChunkWorker:
    """Files chunk requests in a child process, started at the first chunk worth it and
    kept until ``close``; smaller chunks, and a chunk the child could not answer (it died,
    its pipe broke), are filed in this process. Blocking: call from worker threads."""

    def __init__(
        self, min_bytes: int = WORKER_MIN_BYTES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """``clock``: seconds, for how long the child has been idle."""
        self._min_bytes = min_bytes
        self._clock = clock
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._last_used = 0.0
        self.started = 0  # children started so far

    @property
    def running(self) -> bool:
        """Whether a child runs (read without the lock: a hint for when to look again)."""
        return self._process is not None

    def close_if_idle(self, idle_s: float = WORKER_IDLE_S) -> bool:
        """Ends the child if it has filed nothing for ``idle_s``; returns whether one
        still runs."""
        with self._lock:
            if self._process is not None and self._clock() - self._last_used >= idle_s:
                self._stop()
            return self._process is not None

    def file(self, request: ChunkRequest) -> FiledChunk:
        """The chunk of ``request`` filed (chunks.file_request). Raises ChunkWorkerError
        if filing raised in the child."""
        if len(request.data) < self._min_bytes:
            return file_request(request)
        with self._lock:
            try:
                process = self._running()
                _write_frame(_stream(process.stdin), request)
                ok, answer = _read_frame(_stream(process.stdout))
                self._last_used = self._clock()
            except (OSError, EOFError, pickle.UnpicklingError) as error:
                log.warning("delay chunk worker failed (%s); filing in the broker", error)
                self._stop()
                return file_request(request)
        if not ok:
            raise ChunkWorkerError(f"filing a chunk of {request.source} failed:\n{answer}")
        if not isinstance(answer, FiledChunk):
            raise ChunkWorkerError(f"the chunk worker answered {type(answer).__name__}")
        return answer

    def close(self) -> None:
        """Ends the child, if one runs; a later chunk starts another."""
        with self._lock:
            self._stop()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(level)],
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
        raise OSError("the chunk worker has no pipe")
    return stream


def _write_frame(stream: IO[bytes], payload: object) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> Any:
    """The next frame's object; raises EOFError at the end of the stream (or in a frame)."""
    head = stream.read(_FRAME_LENGTH.size)
    if len(head) < _FRAME_LENGTH.size:
        raise EOFError("the chunk worker's pipe closed")
    (length,) = _FRAME_LENGTH.unpack(head)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError("the chunk worker's pipe closed within a frame")
    return pickle.loads(data)


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The child's loop: answers each request with (True, the filed chunk), or (False,
    the traceback) if filing raised, until ``requests`` ends."""
    while True:
        try:
            request = _read_frame(requests)
        except EOFError:
            return
        try:
            answer: tuple[bool, object] = (True, file_request(request))
        except Exception:
            answer = (False, traceback.format_exc())
        _write_frame(answers, answer)


def main() -> None:
    # The broker stops the child by closing its input; an interrupt meant for the broker's
    # terminal must not kill it first with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=sys.argv[1] if len(sys.argv) > 1 else "WARNING",
                        format=_LOG_FORMAT)  # fmt: skip
    try:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    except BrokenPipeError:  # the broker died while a chunk was being filed
        # Python's advice for this case: no second error when stdout is flushed at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
