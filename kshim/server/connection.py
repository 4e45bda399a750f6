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
from kshim.protocol.framing import FrameDecoder, FrameError
from kshim.server.dispatch import ProtocolViolation, decode, respond

log = logging.getLogger(__name__)
READ_CHUNK_BYTES = 256 * 1024
MAX_IN_FLIGHT = 64

ResponseTask = asyncio.Task[list[bytes | memoryview] | None]


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
        await _read_requests(reader, broker, FrameDecoder(max_frame_size), in_flight)
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
    decoder: FrameDecoder,
    in_flight: asyncio.Queue[ResponseTask | None],
) -> None:
    while True:
        data = await reader.read(READ_CHUNK_BYTES)
        if not data:
            return
        decoder.feed(data)
        while (frame := decoder.next_frame()) is not None:
            call = decode(frame)
            await in_flight.put(asyncio.create_task(respond(call, broker)))


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
        if parts is None or broken or writer.is_closing():
            continue
        writer.writelines(parts)
        try:
            await writer.drain()
        except ConnectionError:
            broken = True
