"""One client connection: read frames, run requests, write responses in request order.

Clients pipeline requests; Java, kafka-python and aiokafka match responses
to the head of their in-flight queue, so answers must leave in request order
(research notes §3.3). Requests are decoded in arrival order and each runs as
its own task (a long-polling Fetch does not stop the reader), while a single
writer awaits them first-in, first-out. The number in flight is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kshim.broker.state import Broker
from kshim.protocol.fetch_response import Part
from kshim.protocol.framing import FrameError
from kshim.server.dispatch import ProtocolViolation, decode, respond
from kshim.server.region_sender import send_region
from kshim.server.request_stream import RequestStream
from kshim.storage.interface import FileRegion

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 64

ResponseTask = asyncio.Task[list[Part] | None]


async def serve_connection(stream: RequestStream, broker: Broker) -> None:
    """Serves one connection until the peer closes it or breaks the protocol."""
    transport = stream.transport
    assert transport is not None
    peer = transport.get_extra_info("peername")
    in_flight: asyncio.Queue[ResponseTask | None] = asyncio.Queue(MAX_IN_FLIGHT)
    writer_task = asyncio.create_task(_write_responses(in_flight, stream, transport, peer))
    try:
        client_host = f"/{peer[0]}" if isinstance(peer, tuple) else ""
        await _read_requests(stream, broker, in_flight, client_host)
    except (FrameError, ProtocolViolation) as error:
        log.info("closing connection from %s: %s", peer, error)
    except ConnectionError:
        pass
    finally:
        await in_flight.put(None)
        with contextlib.suppress(Exception):
            await writer_task
        transport.close()
        with contextlib.suppress(Exception):
            await stream.wait_closed()


async def _read_requests(
    stream: RequestStream,
    broker: Broker,
    in_flight: asyncio.Queue[ResponseTask | None],
    client_host: str,
) -> None:
    while (request_frame := await stream.next_frame()) is not None:
        call = decode(request_frame)
        await in_flight.put(asyncio.create_task(respond(call, broker, client_host)))


async def _write_responses(
    in_flight: asyncio.Queue[ResponseTask | None],
    stream: RequestStream,
    transport: asyncio.Transport,
    peer: object,
) -> None:
    """Writes each response as its request's turn comes; stops at the sentinel."""
    broken = False
    while (task := await in_flight.get()) is not None:
        try:
            parts = await task
        except Exception:
            log.exception("request from %s failed; closing the connection", peer)
            broken = True
            transport.close()
            continue
        if parts is None:
            continue
        if broken or transport.is_closing():
            _close_regions(parts)
            continue
        try:
            await _send(stream, transport, parts)
        except (ConnectionError, OSError):
            broken = True


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


def _close_regions(parts: list[Part]) -> None:
    for part in parts:
        if isinstance(part, FileRegion):
            part.close()
