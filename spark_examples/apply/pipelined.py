"""A micro-batch written while Spark reads the next one.

Spark runs a streaming query's micro-batches one after the other: it plans a batch, the
``foreachBatch`` function reads it to the driver (``toArrow``) and writes it, Spark records
it in the checkpoint, and only then plans the next. Once warm, a batch of 20,000 changes
spent 0.21 to 0.48 s in ``toArrow``, 0.38 to 0.52 s in the sink and 0.10 to 0.15 s in
Spark's own work, in series (spark_examples/README.md, "Where the Spark job's time goes").
``PipelinedWrites`` gives each batch's write to one thread of its own and returns, so that
Spark's work and the next batch's reading (the JVM's, mostly) run beside the write. One write
at most is in flight: batches are written in order, and the driver holds two at most.

Spark then records a batch in its checkpoint before the destination holds it, so the
checkpoint cannot say where a restarted job resumes: the destination's own state does
(``kshim_apply_state``, written with the rows; job.starting_offsets), as a Kafka Connect
sink that keeps its offsets in the destination resumes from them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from spark_examples.apply.sink import SourceRecord

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

Write = Callable[[list[SourceRecord], int], None]


class PipelinedWrites:
    """Runs ``write(records, batch_id)`` on a thread of its own, one batch at a time."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kshim-apply-write")
        self._pending: Future[None] | None = None
        self.on_failure: Callable[[], None] | None = None  # called once a write has failed

    def submit(self, records: list[SourceRecord], batch_id: int) -> None:
        """Waits for the previous batch's write, then starts this one's; raises what the
        previous write raised (the query then fails before its next batch is written)."""
        self.wait()
        self._pending = self._thread.submit(self._write, records, batch_id)
        self._pending.add_done_callback(self._done)

    def _done(self, write: Future[None]) -> None:
        if write.exception() is not None and self.on_failure is not None:
            self.on_failure()

    def wait(self) -> None:
        """Waits for the write in flight, if any; raises what it raised."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Waits for the write in flight and ends the thread; raises what the write raised."""
        try:
            self.wait()
        finally:
            self._thread.shutdown(wait=True)


class ApplyQuery:
    """A running apply: Spark's query and its write in flight. Offers the part of
    ``StreamingQuery`` the apply's callers use, under the same names; ending the query
    (``awaitTermination``, ``stop``) waits for the last write, and ``exception`` reports
    that write's failure when Spark's query had none."""

    def __init__(self, query: StreamingQuery, writes: PipelinedWrites) -> None:
        self.query = query
        self._writes: PipelinedWrites | None = writes
        self._error: BaseException | None = None
        # A failed write stops the query at once, as a failing foreachBatch would, rather
        # than when the next batch comes, which an idle stream may never bring. Stopped from
        # a thread of its own: stop waits for Spark's batch, which may wait for the writer.
        writes.on_failure = lambda: threading.Thread(target=query.stop, daemon=True).start()

    @property
    def isActive(self) -> bool:  # noqa: N802 (StreamingQuery's name)
        return bool(self.query.isActive)

    @property
    def lastProgress(self) -> dict[str, Any] | None:  # noqa: N802 (StreamingQuery's name)
        return self.query.lastProgress

    def awaitTermination(self, timeout: float | None = None) -> bool | None:  # noqa: N802
        """As StreamingQuery's (raises its StreamingQueryException when the query failed);
        once the query ended, the last write is waited for too."""
        try:  # pyspark's stubs say whole seconds
            return self.query.awaitTermination(None if timeout is None else math.ceil(timeout))
        finally:
            if not self.query.isActive:
                self._settle()

    def stop(self) -> None:
        self.query.stop()
        self._settle()

    def exception(self) -> BaseException | None:
        """Spark's failure of the query, else (once it ended) the failure of its last write,
        else None."""
        error = self.query.exception()
        if error is not None:
            return error
        if not self.query.isActive:
            self._settle()
        return self._error

    def _settle(self) -> None:
        writes, self._writes = self._writes, None
        if writes is None:
            return
        try:
            writes.close()
        except Exception as error:  # ApplyError, or the destination unreachable
            self._error = error
