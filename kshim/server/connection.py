"""One client connection: read frames, run requests, write responses in request order.

Clients pipeline requests; Java, kafka-python and aiokafka match responses
to the head of their in-flight queue, so answers must leave in request order
(docs/protocol-notes.md §3.3). Requests are decoded in arrival order and each runs as
its own task (a long-polling Fetch does not stop the reader), while a single
writer awaits them first-in, first-out. The number in flight is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

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


async def serve_connection(
    stream: RequestStream,
    broker: Broker,
    observe: Observer | None = None,
    session: Session | None = None,
    authentication_ended: Callable[[bool], None] | None = None,
) -> None:
    """Serves one connection until the peer closes it or breaks the protocol; ``observe``
    is told of each request answered (the metrics). ``session`` is the connection's
    listener and principal; on a SASL listener nothing but ApiVersions and the SASL
    requests is served until it has authenticated (sasl_gate.py), and
    ``authentication_ended`` is told whether that failed as soon as it is known."""
    transport = stream.transport
    assert transport is not None
    peer = transport.get_extra_info("peername")
    session = Session() if session is None else session
    in_flight: asyncio.Queue[InFlight | None] = asyncio.Queue(MAX_IN_FLIGHT)
    writer_task = asyncio.create_task(_write_responses(in_flight, stream, transport, peer))
    refused = False
    try:
        client_host = f"/{peer[0]}" if isinstance(peer, tuple) else ""
        if not session.authenticated:
            await authenticate(
                stream, broker, session, in_flight, client_host, authentication_ended
            )
        await _read_requests(stream, broker, session, in_flight, client_host, observe)
    except AuthenticationEnded as ended:
        log.info("closing connection from %s: %s", peer, ended)
        refused = True
    except (FrameError, ProtocolViolation) as error:
        log.info("closing connection from %s: %s", peer, error)
    except ConnectionError:
        pass
    except asyncio.CancelledError:
        # The broker is stopping (KafkaServer.stop cancels every connection): dropped at
        # once, as Kafka's SocketServer closes its channels at shutdown. A graceful close
        # would wait, on TLS, for the peer's close_notify: up to the loop's 30 s SSL
        # shutdown timeout from a client that is not reading.
        transport.abort()
        raise
    except Exception:
        # kshim's own fault, not the peer's: this connection ends, the broker goes on.
        log.exception("closing connection from %s: reading its requests failed", peer)
    finally:
        await _close(stream, in_flight, writer_task, linger=refused)


async def _close(
    stream: RequestStream,
    in_flight: asyncio.Queue[InFlight | None],
    writer_task: asyncio.Task[None],
    linger: bool,
) -> None:
    """Answers what was read, then closes; ``linger``: the peer was refused, and is given
    a moment to read why before the close (sasl_gate.py)."""
    transport = stream.transport
    try:
        await in_flight.put(None)
        with contextlib.suppress(Exception):
            await writer_task
        if linger:
            await _linger(stream)
        if transport is not None:
            transport.close()
        with contextlib.suppress(Exception):
            await stream.wait_closed()
    finally:
        stream.release_all()  # the budget's bytes no request of this connection holds


async def _read_requests(
    stream: RequestStream,
    broker: Broker,
    session: Session,
    in_flight: asyncio.Queue[InFlight | None],
    client_host: str,
    observe: Observer | None,
) -> None:
    while (request_frame := await stream.next_frame()) is not None:
        request = _start(request_frame, stream, broker, client_host, observe, session)
        # Not kept while the next frame is awaited: its task holds what it needs, and only
        # until it is done, when its bytes leave the budget.
        del request_frame
        await in_flight.put(request)


def _start(
    request_frame: bytes | bytearray,
    stream: RequestStream,
    broker: Broker,
    client_host: str,
    observe: Observer | None,
    session: Session,
) -> InFlight:
    """Decodes a request and starts its task, which holds the frame's reservation in the
    budget until it is done. Raises ProtocolViolation."""
    call = decode(request_frame)
    task = asyncio.create_task(respond(call, broker, client_host, observe, session))
    stream.hold_until(task)
    return call.header, task


async def _write_responses(
    in_flight: asyncio.Queue[InFlight | None],
    stream: RequestStream,
    transport: asyncio.Transport,
    peer: object,
) -> None:
    """Writes each response as its request's turn comes; stops at the sentinel."""
    broken = False
    encrypted = transport.get_extra_info("ssl_object") is not None
    while (request := await in_flight.get()) is not None:
        header, task = request
        try:
            parts = await task
            if parts is None:
                continue
            if broken or transport.is_closing():
                _close_regions(parts)
                continue
            if encrypted:
                await _send_encrypted(stream, transport, parts)
            else:
                await _send(stream, transport, parts)
        except RegionShortened as error:
            # A segment file cut short on disk since the read was planned (docs/disk-faults.md):
            # the answer's size is out, so the client would take later bytes for the missing.
            log.error("closing connection from %s: %s: %s", peer, describe(header), error)
            broken = True
            transport.close()
        except (ConnectionError, OSError):
            # The peer went away, or a file could not be read while answering: either way no
            # later answer can be matched, so the connection ends (and a client waiting on it
            # learns so at once, rather than at its request timeout).
            broken = True
            transport.close()
        except Exception:
            # kshim's own fault: answering this request failed, so the client cannot match
            # later answers to its requests; this connection ends, the broker goes on.
            log.exception("closing connection from %s: %s failed", peer, describe(header))
            broken = True
            transport.close()


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
