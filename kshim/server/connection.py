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
from kshim.protocol.framing import FRAME_SIZE_LENGTH, FrameError, frame_size
from kshim.server.dispatch import ProtocolViolation, decode, respond
from kshim.storage.interface import FileRegion

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 64

ResponseTask = asyncio.Task[list[Part] | None]


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    broker: Broker,
    max_frame_size: int,
) -> None:
    """Serves one connection until the peer closes it or breaks the protocol."""
    peer = writer.get_extra_info("peername")
    in_flight: asyncio.Queue[ResponseTask | None] = asyncio.Queue(MAX_IN_FLIGHT)
    writer_task = asyncio.create_task(_write_responses(in_flight, writer, peer))
    try:
        client_host = f"/{peer[0]}" if isinstance(peer, tuple) else ""
        await _read_requests(reader, broker, max_frame_size, in_flight, client_host)
    except (FrameError, ProtocolViolation) as error:
        log.info("closing connection from %s: %s", peer, error)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        await in_flight.put(None)
        with contextlib.suppress(Exception):
            await writer_task
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _read_requests(
    reader: asyncio.StreamReader,
    broker: Broker,
    max_frame_size: int,
    in_flight: asyncio.Queue[ResponseTask | None],
    client_host: str,
) -> None:
    while True:
        try:
            prefix = await reader.readexactly(FRAME_SIZE_LENGTH)
        except asyncio.IncompleteReadError as error:
            if error.partial:
                raise
            return  # the peer closed between requests
        # Read straight out of the stream's buffer (one copy), not through a FrameDecoder,
        # whose own buffer copied every produced byte three more times.
        call = decode(await reader.readexactly(frame_size(prefix, max_frame_size)))
        await in_flight.put(asyncio.create_task(respond(call, broker, client_host)))


async def _write_responses(
    in_flight: asyncio.Queue[ResponseTask | None], writer: asyncio.StreamWriter, peer: object
) -> None:
    """Writes each response as its request's turn comes; stops at the sentinel."""
    broken = False
    while (task := await in_flight.get()) is not None:
        try:
            parts = await task
        except Exception:
            log.exception("request from %s failed; closing the connection", peer)
            broken = True
            writer.close()
            continue
        if parts is None:
            continue
        if broken or writer.is_closing():
            _close_regions(parts)
            continue
        try:
            await _send(writer, parts)
        except (ConnectionError, OSError):
            broken = True


async def _send(writer: asyncio.StreamWriter, parts: list[Part]) -> None:
    """Writes one response: bytes through the transport, file regions with sendfile."""
    pending: list[bytes | memoryview] = []
    try:
        for index, part in enumerate(parts):
            if isinstance(part, FileRegion):
                writer.writelines(pending)
                pending = []
                await writer.drain()
                await _send_region(writer, part)
                parts[index] = b""  # sent and closed
            else:
                pending.append(part)  # type: ignore[arg-type]
        writer.writelines(pending)
        await writer.drain()
    finally:
        _close_regions(parts)


async def _send_region(writer: asyncio.StreamWriter, region: FileRegion) -> None:
    try:
        await asyncio.get_running_loop().sendfile(
            writer.transport, region.as_file(), region.position, region.length
        )
    finally:
        region.close()


def _close_regions(parts: list[Part]) -> None:
    for part in parts:
        if isinstance(part, FileRegion):
            part.close()
