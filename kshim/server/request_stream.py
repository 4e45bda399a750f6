"""One connection's transport side: request frames in, response bytes out.

An asyncio BufferedProtocol: the transport receives straight into the buffers
a FrameReceiver hands out, so the bytes of a large produce request are copied
only by the kernel (StreamReader copied each one into its buffer and again
out of it). Reading pauses while MAX_QUEUED frames wait for the connection's
reader; writers wait for the transport's buffer to drain.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import cast

from kshim.protocol.framing import FrameError, FrameReceiver

MAX_QUEUED = 16  # frames received but not yet taken before reading pauses


class RequestStream(asyncio.BufferedProtocol):
    def __init__(self, max_frame_size: int, on_open: Callable[[RequestStream], None]) -> None:
        self._receiver = FrameReceiver(max_frame_size)
        self._on_open = on_open
        self._frames: collections.deque[bytes | bytearray] = collections.deque()
        self._frame_waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._eof = False
        self._lost = False
        self._reading_paused = False
        self._writing_paused = False
        self._tls = False
        self.transport: asyncio.Transport | None = None

    # asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transports have asyncio.Transport's methods without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self._tls = transport.get_extra_info("sslcontext") is not None
        self._on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.extend(self._receiver.received(nbytes))
        if self._receiver.error is not None or len(self._frames) >= MAX_QUEUED:
            self._pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake_reader()
        # Half-closed: answers to requests already read still go out. TLS cannot stay
        # half-open (asyncio warns and closes), so there the answer is None.
        return None if self._tls else True

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = self._lost = True
        self._wake_reader()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_exception(ConnectionResetError("connection lost"))
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    # the connection's side

    async def next_frame(self) -> bytes | bytearray | None:
        """The next request frame; None once the peer closed. Raises FrameError for a
        broken size prefix (after every frame before it)."""
        while not self._frames:
            if self._receiver.error is not None:
                raise FrameError(str(self._receiver.error))
            if self._eof:
                return None
            self._frame_waiter = asyncio.get_running_loop().create_future()
            await self._frame_waiter
        frame = self._frames.popleft()
        if self._reading_paused and len(self._frames) < MAX_QUEUED // 2:
            self._resume_reading()
        return frame

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
        await self._closed

    def _wake_reader(self) -> None:
        if self._frame_waiter is not None and not self._frame_waiter.done():
            self._frame_waiter.set_result(None)

    def _pause_reading(self) -> None:
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.transport is not None and self._receiver.error is None and not self._lost:
            self._reading_paused = False
            self.transport.resume_reading()
