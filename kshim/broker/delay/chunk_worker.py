"""Filing ``T.delay`` chunks on a core the event loop does not use: chunk requests
(kshim/broker/delay/chunks.py) answered with the filed chunk by a child process
(kshim/broker/child_process.py).

Decoding a delayed record, reading its headers, packing it and filing it cost the broker
several microseconds of Python each, all under the one interpreter lock that Produce also
needs (docs/design.md, "Where the CPU goes, and why"). The child
holds no state: a request carries what the store said (read position, next seq, topic
id, near buckets), the answer is what the store commits (DelayStore.commit_chunk) in the
broker, under the schedule's lock as before. So exactly-once and recovery do not change:
a chunk the broker did not commit is read again, and a child that dies takes nothing
with it.

The child is started with the first chunk worth sending (WORKER_MIN_BYTES; a broker
nobody delays much on never starts it) and ended after WORKER_IDLE_S without work.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable

from kshim.broker.child_process import ChildFailed, ChildProcess, Handler
from kshim.broker.delay.chunks import ChunkRequest, file_request
from kshim.storage.schedule.delay_filing import FiledChunk

log = logging.getLogger(__name__)

# Below this a chunk is filed in the broker: a round trip to the child costs about a
# millisecond, and a few records cost less than that to file.
WORKER_MIN_BYTES = 128 << 10
# A child that filed nothing for this long is ended (about 35 MB of RSS back); the next
# large chunk starts another (about 0.3 s of CPU).
WORKER_IDLE_S = 30.0


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
        self._child = ChildProcess(f"{__name__}:filing_handler")
        self._lock = threading.Lock()  # the idle check against a chunk being filed
        self._last_used = 0.0

    @property
    def running(self) -> bool:
        """Whether a child runs (read without the lock: a hint for when to look again)."""
        return self._child.process is not None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The child, if one runs."""
        return self._child.process

    @property
    def started(self) -> int:
        """Children started so far."""
        return self._child.started

    def close_if_idle(self, idle_s: float = WORKER_IDLE_S) -> bool:
        """Ends the child if it has filed nothing for ``idle_s``; returns whether one
        still runs."""
        with self._lock:
            if self.running and self._clock() - self._last_used >= idle_s:
                self._child.close()
            return self.running

    def file(self, request: ChunkRequest) -> FiledChunk:
        """The chunk of ``request`` filed (chunks.file_request). Raises ChildFailed if
        filing raised in the child."""
        if len(request.data) < self._min_bytes:
            return file_request(request)
        with self._lock:
            try:
                answer = self._child.call(request)
                self._last_used = self._clock()
            except (OSError, EOFError) as error:  # UnreadableAnswer is an EOFError
                log.warning("delay chunk worker failed (%s); filing in the broker", error)
                return file_request(request)
        if not isinstance(answer, FiledChunk):
            raise ChildFailed(f"the chunk worker answered {type(answer).__name__}")
        return answer

    def close(self) -> None:
        """Ends the child, if one runs; a later chunk starts another."""
        with self._lock:
            self._child.close()


def filing_handler() -> Handler:
    """The child's handler: a chunk request filed."""

    def file(request: object) -> object:
        if not isinstance(request, ChunkRequest):
            raise TypeError(f"a chunk request was expected, not {type(request).__name__}")
        return file_request(request)

    return file
