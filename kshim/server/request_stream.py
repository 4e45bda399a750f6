"""One connection's transport side: request frames in, response bytes out.

An asyncio BufferedProtocol: the transport receives straight into the buffers
a FrameReceiver hands out, so the bytes of a large produce request are copied
only by the kernel (StreamReader copied each one into its buffer and again
out of it). Reading pauses while MAX_QUEUED frames wait for the connection's
reader; writers wait for the transport's buffer to drain.

A frame over SMALL_FRAME_BYTES has its bytes reserved in the broker's RequestBudget
(request_budget.py) once its size prefix is read and before its body is: while the
reservation waits, reading pauses, and the body stays in the kernel's socket buffer. The
reservation is held while the frame is queued, then by the task handling it
(``hold_until``); whatever the connection still holds when it ends is given back by
``release_all``. Such a frame is read only once every frame before it has been taken: a
connection whose reader is held up (its answers not read, so its in-flight requests at
their bound) then holds at most one of them, not MAX_QUEUED.

Smaller frames are outside the budget: they arrive with their size prefix, already in the
connection's staging buffer (waiting would keep nothing in the kernel), and what they hold
is bounded per connection by MAX_QUEUED and connection.py's MAX_IN_FLIGHT. So a client
that announces a large frame and stalls holds back other clients' large requests, as in
Kafka's pool, but never their small ones (ApiVersions, Metadata, heartbeats, fetches).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar, cast

from kshim.protocol.framing import FrameError, FrameReceiver
from kshim.server.request_budget import Grant, RequestBudget, Waiting

_Result = TypeVar("_Result")  # what a task handling a request returns: anything

MAX_QUEUED = 16  # frames received but not yet taken before reading pauses
SMALL_FRAME_BYTES = 1 << 14  # frames up to this size are outside the budget
# The reservation of a frame outside the budget: nothing to give back.
UNCOUNTED = Grant(None, 0)


class RequestStream(asyncio.BufferedProtocol):
    # Slots, lists rather than deques (an empty deque holds a 64-slot block, 760 bytes) and
    # futures made only when awaited: most of a broker's connections are idle most of the
    # time, and each costs only what it holds (500 idle connections, benchmarks/).
    __slots__ = (
        "_budget",
        "_closed",
        "_drain_waiter",
        "_eof",
        "_frame_waiter",
        "_frames",
        "_grants",
        "_lost",
        "_on_open",
        "_reading_paused",
        "_receiver",
        "_taken",
        "_tls",
        "_waiting",
        "_writing_paused",
        "on_ready",
        "received",
        "transport",
    )

    def __init__(
        self,
        max_frame_size: int,
        on_open: Callable[[RequestStream], None],
        budget: RequestBudget | None = None,
    ) -> None:
        """``budget`` is shared by every connection of the broker (None: one of this
        connection's own, without bound)."""
        self._receiver = FrameReceiver(max_frame_size, admit_each=True)
        self._on_open: Callable[[RequestStream], None] | None = on_open
        self._budget = RequestBudget(None) if budget is None else budget
        # At most MAX_QUEUED frames, so taking the first of a list costs nothing to speak of.
        self._frames: list[bytes | bytearray] = []
        # One reservation per frame queued in _frames, in order, then one for the frame
        # being received, if its body has been admitted.
        self._grants: list[Grant] = []
        self._taken: Grant | None = None  # the last frame taken, until hold_until
        self._waiting: Waiting | None = None  # the next frame's reservation, not granted yet
        self._frame_waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] | None = None  # made by wait_closed, if awaited
        self._eof = False
        self._lost = False
        self._reading_paused = False
        self._writing_paused = False
        self._tls = False
        self.transport: asyncio.Transport | None = None
        # Called when there is something for ``take_frame`` to take or to say (a frame, the
        # end of the stream or a broken frame), so a connection needs no task while idle.
        self.on_ready: Callable[[], None] | None = None
        # Set by each read, cleared by the idle-connection sweeps (idle_connections.py): one
        # store per read rather than a clock reading or a timer per connection.
        self.received = False

    # asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transports have asyncio.Transport's methods without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self._tls = transport.get_extra_info("sslcontext") is not None
        # Called once, and its closure not kept for the connection's lifetime.
        on_open, self._on_open = self._on_open, None
        if on_open is not None:
            on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.received = True
        self._frames.extend(self._receiver.received(nbytes))
        self._admit()
        if self._receiver.error is not None or len(self._frames) >= MAX_QUEUED:
            self._pause_reading()
        self._wake_reader()

    def _admit(self) -> None:
        """Admits each frame whose size prefix has arrived: a small one at once, a larger
        one once every frame before it is taken and the budget has room for its bytes;
        reading pauses while one waits."""
        while self._waiting is None and (size := self._receiver.wanted) is not None:
            if size <= SMALL_FRAME_BYTES:
                self._grants.append(UNCOUNTED)
                self._frames.extend(self._receiver.admit())
                continue
            if self._frames:
                self._pause_reading()  # next_frame admits it once the queue is empty
                return
            reserved = self._budget.reserve(size, self._granted)
            if isinstance(reserved, Waiting):
                self._waiting = reserved
                self._pause_reading()
                return
            self._grants.append(reserved)
            self._frames.extend(self._receiver.admit())

    def _granted(self, grant: Grant) -> None:
        """The budget granted the reservation this connection waited for."""
        self._waiting = None
        self._grants.append(grant)
        self._frames.extend(self._receiver.admit())
        self._admit()
        self._maybe_resume_reading()
        self._wake_reader()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake_reader()
        # Half-closed: answers to requests already read still go out. TLS cannot stay
        # half-open (asyncio warns and closes), so there the answer is None.
        return None if self._tls else True

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = self._lost = True
        self._release_unread()
        self._wake_reader()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_exception(ConnectionResetError("connection lost"))
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    # the connection's side

    async def next_frame(self) -> bytes | bytearray | None:
        """The next request frame, once it has arrived; None once the peer closed. Raises
        as ``take_frame`` does."""
        while (frame := self.take_frame()) is None and not self._eof:
            self._frame_waiter = asyncio.get_running_loop().create_future()
            await self._frame_waiter
        return frame

    def take_frame(self) -> bytes | bytearray | None:
        """The next request frame if one has arrived, else None (``ended`` says whether
        one still may). Raises FrameError for a broken size prefix (after every frame
        before it). The frame taken before is no longer counted in the budget, unless it
        was handed to a task (``hold_until``)."""
        self._release_taken()
        if not self._frames:
            if self._receiver.error is not None:
                raise FrameError(str(self._receiver.error))
            return None
        frame = self._frames.pop(0)
        self._taken = self._grants.pop(0)
        if not self._frames:
            self._admit()
        self._maybe_resume_reading()
        return frame

    @property
    def ready(self) -> bool:
        """Whether ``take_frame`` has something to take or to say."""
        return bool(self._frames) or self._eof or self._receiver.error is not None

    @property
    def ended(self) -> bool:
        """Whether the peer has closed and every frame it sent has been taken."""
        return self._eof and not self._frames

    def hold_until(self, task: asyncio.Future[_Result]) -> None:
        """The frame last taken stays counted in the budget until ``task`` (handling its
        request) is done, whether it succeeds, fails or is cancelled."""
        grant, self._taken = self._taken, None
        if grant is not None and grant is not UNCOUNTED:
            task.add_done_callback(lambda _: grant.release())

    def release_all(self) -> None:
        """The connection has ended: gives back the bytes of every frame not handed to a
        task, and of the frame being received; frames not yet taken are dropped."""
        self._release_taken()
        self._release_unread()
        self._frames.clear()
        while self._grants:
            self._grants.pop(0).release()

    def _release_taken(self) -> None:
        if self._taken is not None:
            self._taken.release()
            self._taken = None

    def _release_unread(self) -> None:
        """Cancels the reservation waiting and releases the frame being received: no more
        bytes will arrive."""
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        while len(self._grants) > len(self._frames):
            self._grants.pop().release()

    def limit_frames(self, max_frame_size: int) -> None:
        """Frames not yet begun may be at most ``max_frame_size`` bytes."""
        self._receiver.limit(max_frame_size)

    async def drain(self) -> None:
        """Returns once the transport can take more bytes; raises if the peer is gone."""
        if self._lost:
            raise ConnectionResetError("connection lost")
        if self._writing_paused:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter

    async def wait_closed(self) -> None:
        if self._lost:
            return
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        await self._closed

    def _wake_reader(self) -> None:
        """Tells the reader when ``take_frame`` has something for it (not for each part
        of a large frame)."""
        if not self.ready:
            return
        if self._frame_waiter is not None and not self._frame_waiter.done():
            self._frame_waiter.set_result(None)
        if self.on_ready is not None:
            self.on_ready()

    def _pause_reading(self) -> None:
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _maybe_resume_reading(self) -> None:
        """Resumes reading once the queue has room and no frame waits to be admitted."""
        if (
            self._reading_paused
            and self._receiver.wanted is None
            and len(self._frames) < MAX_QUEUED // 2
            and self.transport is not None
            and self._receiver.error is None
            and not self._lost
            and not self.transport.is_closing()
        ):
            self._reading_paused = False
            self.transport.resume_reading()
