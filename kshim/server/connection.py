"""One client connection: read frames, run requests, write responses in request order.

Clients pipeline requests; Java, kafka-python and aiokafka match responses
to the head of their in-flight queue, so answers must leave in request order
(docs/protocol-notes.md §3.3). Requests are decoded in arrival order and each runs as
its own task (a long-polling Fetch does not stop the reader), while a single
writer awaits them first-in, first-out. The number in flight is bounded.

Most of a broker's connections are idle most of the time (a consumer between polls, a
pooled producer; benchmarks/accumulation.py opens 500), so an idle one holds no task,
queue or future: its reader task is started when the stream has a frame (or its end) to
take and ends once it has none, and its writer task is started with the first answer due
and ends with the last. What is left is the transport, the stream and this object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from kshim.broker.broker import Broker
from kshim.broker.security.session import Session
from kshim.protocol.fetch_response import Part
from kshim.protocol.framing import FrameError
from kshim.protocol.headers import RequestHeader
from kshim.server.dispatch import Observer, ProtocolViolation, decode, respond
from kshim.server.encrypted_sender import write_encrypted
from kshim.server.region_sender import RegionShortened, send_region
from kshim.server.request_stream import RequestStream
from kshim.server.security.sasl_gate import AuthenticationEnded, authenticate
from kshim.storage.interface import FileRegion

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 64
LINGER_S = 0.5  # how long a refused connection waits for its client to close

ResponseTask = asyncio.Task[list[Part] | None]
# A request being answered: its header (for the log line if it fails) and its task.
InFlight = tuple[RequestHeader, ResponseTask]


class ConnectionEvents(Protocol):
    """What the listener is told of its connections (one object for all of them)."""

    def authentication_ended(self, connection: Connection, failed: bool) -> None:
        """A SASL exchange succeeded or failed (as soon as that is known)."""

    def closed(self, connection: Connection) -> None:
        """The connection has ended and given back what it held."""


class Connection:
    """Serves one connection until the peer closes it or breaks the protocol; ``observe``
    is told of each request answered (the metrics). ``session`` is the connection's
    listener and principal; on a SASL listener nothing but ApiVersions and the SASL
    requests is served until it has authenticated (sasl_gate.py). Threads: the event
    loop's only."""

    __slots__ = (
        "_events",
        "_in_flight",
        "_reader",
        "_reader_started",
        "_room",
        "_writer",
        "broker",
        "client_host",
        "last_active",
        "observe",
        "peer",
        "session",
        "stream",
    )

    def __init__(
        self,
        stream: RequestStream,
        broker: Broker,
        session: Session,
        events: ConnectionEvents,
        observe: Observer | None = None,
    ) -> None:
        transport = stream.transport
        assert transport is not None
        self.stream = stream
        self.broker = broker
        self.session = session
        self.observe = observe
        self._events = events
        self.peer: object = transport.get_extra_info("peername")
        self.client_host = f"/{self.peer[0]}" if isinstance(self.peer, tuple) else ""
        self._in_flight: list[InFlight] = []  # answered in this order, at most MAX_IN_FLIGHT
        self._room: asyncio.Future[None] | None = None  # the reader waits for room
        # Set while running; the reader task stays set once the connection is closing.
        self._reader: asyncio.Task[None] | None = None
        self._reader_started = False  # whether the reader task has taken its first step
        self._writer: asyncio.Task[None] | None = None
        self.last_active = asyncio.get_running_loop().time()  # see ``quiet_since``

    def start(self) -> None:
        """Serves the connection from now on (frames that came with it first)."""
        self.stream.on_ready = self._wake
        # The SASL gate waits for each frame in turn, in a reader task of its own.
        if not self.session.authenticated or self.stream.ready:
            self._wake()

    def abort(self) -> None:
        """Drops the connection at once (the broker is stopping, or the connection is idle:
        idle_connections.py), as Kafka's SocketServer closes its channels. A graceful close
        would wait, on TLS, for the peer's close_notify: up to the loop's 30 s SSL shutdown
        timeout from a client that is not reading. ``events.closed`` is told once it has ended."""
        self._abort_transport()
        # A task cancelled before its first step never runs its body, so its close would
        # never come; one not started yet finds the stream ended and closes by itself.
        if self._reader is not None and self._reader_started:
            self._reader.cancel()

    def quiet_since(self, now: float) -> float:
        """The loop time of the connection's last read or answer as the sweeps of
        idle_connections.py see it: ``now`` if it has read since the last sweep or is owed
        an answer (a long-polling Fetch is not idle)."""
        if self.stream.received or self._in_flight or self._writer is not None:
            self.stream.received = False
            self.last_active = now
        return self.last_active

    def _abort_transport(self) -> None:
        if self.stream.transport is not None:
            self.stream.transport.abort()

    def _wake(self) -> None:
        """The stream has something to take: a reader task takes it, unless one is on."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        self._reader_started = True
        ended = True
        refused = False
        try:
            if not self.session.authenticated:
                await authenticate(
                    self.stream,
                    self.broker,
                    self.session,
                    self._put,
                    self.client_host,
                    self._authentication_ended,
                )
            ended = await self._read_requests()
        except AuthenticationEnded as reason:
            log.info("closing connection from %s: %s", self.peer, reason)
            refused = True
        except (FrameError, ProtocolViolation) as error:
            log.info("closing connection from %s: %s", self.peer, error)
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            self._abort_transport()  # the broker is stopping (``abort``)
            raise
        except Exception:
            # kshim's own fault, not the peer's: this connection ends, the broker goes on.
            log.exception("closing connection from %s: reading its requests failed", self.peer)
        finally:
            if ended:
                await self._close(linger=refused)
            else:
                self._reader = None
                self._reader_started = False

    def _authentication_ended(self, failed: bool) -> None:
        self._events.authentication_ended(self, failed)

    async def _read_requests(self) -> bool:
        """Starts a task for each frame taken, in order; returns whether the stream has
        ended (else it has nothing to take for now). Raises as the stream and ``decode``
        do."""
        stream = self.stream
        while (request_frame := stream.take_frame()) is not None:
            request = _start(request_frame, self)
            # Not kept while the next frame is awaited: its task holds what it needs, and
            # only until it is done, when its bytes leave the budget.
            del request_frame
            await self._put(request)
        return stream.ended

    async def _put(self, request: InFlight) -> None:
        """Queues a request to be answered in turn; waits while MAX_IN_FLIGHT are."""
        while len(self._in_flight) >= MAX_IN_FLIGHT:
            self._room = asyncio.get_running_loop().create_future()
            await self._room
        self._in_flight.append(request)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_responses())

    async def _write_responses(self) -> None:
        """Writes each response as its request's turn comes, until none is due."""
        transport = self.stream.transport
        assert transport is not None
        encrypted = transport.get_extra_info("ssl_object") is not None
        in_flight = self._in_flight
        try:
            while in_flight:
                header, task = in_flight.pop(0)
                if self._room is not None and not self._room.done():
                    self._room.set_result(None)
                await self._answer(header, task, transport, encrypted)
        finally:
            self._writer = None

    async def _answer(
        self,
        header: RequestHeader,
        task: ResponseTask,
        transport: asyncio.Transport,
        encrypted: bool,
    ) -> None:
        try:
            parts = await task
            if parts is None:
                return
            # A closing transport: an answer before failed, so later ones cannot be matched.
            if transport.is_closing():
                _close_regions(parts)
                return
            if encrypted:
                await _send_encrypted(self.stream, transport, parts)
            else:
                await _send(self.stream, transport, parts)
        except RegionShortened as error:
            # A segment file cut short on disk since the read was planned (docs/disk-faults.md):
            # the answer's size is out, so the client would take later bytes for the missing.
            log.error("closing connection from %s: %s: %s", self.peer, describe(header), error)
            transport.close()
        except (ConnectionError, OSError):
            # The peer went away, or a file could not be read while answering: either way no
            # later answer can be matched, so the connection ends (and a client waiting on it
            # learns so at once, rather than at its request timeout).
            transport.close()
        except Exception:
            # kshim's own fault: answering this request failed, so the client cannot match
            # later answers to its requests; this connection ends, the broker goes on.
            log.exception("closing connection from %s: %s failed", self.peer, describe(header))
            transport.close()

    async def _close(self, linger: bool) -> None:
        """Answers what was read, then closes; ``linger``: the peer was refused, and is
        given a moment to read why before the close (sasl_gate.py)."""
        stream = self.stream
        try:
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    await self._writer
            if linger:
                await _linger(stream)
            if stream.transport is not None:
                stream.transport.close()
            with contextlib.suppress(Exception):
                await stream.wait_closed()
        finally:
            stream.on_ready = None
            stream.release_all()  # the budget's bytes no request of this connection holds
            self._events.closed(self)


def _start(request_frame: bytes | bytearray, connection: Connection) -> InFlight:
    """Decodes a request and starts its task, which holds the frame's reservation in the
    budget until it is done. Raises ProtocolViolation."""
    call = decode(request_frame)
    task = asyncio.create_task(
        respond(
            call,
            connection.broker,
            connection.client_host,
            connection.observe,
            connection.session,
        )
    )
    connection.stream.hold_until(task)
    return call.header, task


async def _linger(stream: RequestStream) -> None:
    """After a refused authentication, the refusal sent: the client closes first (it does
    on a refusal), or LINGER_S passes. A close right behind the refusal reaches some
    clients with it, and kafka-python then sees the connection end, not the reason."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(LINGER_S):
            while await stream.next_frame() is not None:
                pass


def describe(header: RequestHeader) -> str:
    """Names a request in a log line: API, version and correlation id."""
    return f"api {header.api_key} v{header.api_version} (correlation id {header.correlation_id})"


async def _send(stream: RequestStream, transport: asyncio.Transport, parts: list[Part]) -> None:
    """Writes one response: bytes through the transport, file regions with sendfile."""
    pending: list[bytes | memoryview] = []
    try:
        for index, part in enumerate(parts):
            if isinstance(part, FileRegion):
                transport.writelines(pending)
                pending = []
                await stream.drain()
                await send_region(transport, part)
                parts[index] = b""  # sent and closed
            else:
                pending.append(part)  # type: ignore[arg-type]
        transport.writelines(pending)
        await stream.drain()
    finally:
        _close_regions(parts)


async def _send_encrypted(
    stream: RequestStream, transport: asyncio.Transport, parts: list[Part]
) -> None:
    """Writes one response through TLS (encrypted_sender.py)."""
    try:
        await write_encrypted(transport, parts)
        await stream.drain()
    finally:
        _close_regions(parts)


def _close_regions(parts: list[Part]) -> None:
    for part in parts:
        if isinstance(part, FileRegion):
            part.close()
