"""send_region on both event loops: bytes in order, whole, zero-copy or not.

uvloop has no loop.sendfile, so kshim calls os.sendfile on the socket itself and queues
whatever the socket does not take at once; these tests make the socket refuse part of it
(a client that does not read yet, behind a small receive buffer) and check that the
client still gets every byte in order.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from kshim.cli.event_loop import run_on
from kshim.server.region_sender import send_region
from kshim.storage.interface import FileRegion

LOOPS = ["asyncio", "uvloop"]  # kshim.event.loop's choices
CLIENT_RECEIVE_BUFFER = 64 * 1024
MIB = 1 << 20


def segment_file(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(size))
    return path


async def serve_once(before: bytes, region: FileRegion, client_delay_s: float) -> tuple[bytes, int]:
    """A server writes ``before``, the region and b"END" to one client, which starts
    reading only after ``client_delay_s``; returns what the client read and the bytes
    the transport still held right after send_region returned."""
    held_after_send: list[int] = []

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.write(before)
        await send_region(writer.transport, region)  # type: ignore[arg-type]
        held_after_send.append(writer.transport.get_write_buffer_size())
        writer.write(b"END")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RECEIVE_BUFFER)
    client.setblocking(False)
    await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=client)
    await asyncio.sleep(client_delay_s)
    received = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    server.close()
    await server.wait_closed()
    return received, held_after_send[0]


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_region_larger_than_the_socket_takes_arrives_whole(
    loop_name: str, tmp_path: Path
) -> None:
    path = segment_file(tmp_path, 12 * MIB)
    region = FileRegion(os.open(path, os.O_RDONLY), MIB, 10 * MIB)

    received, held = run_on(loop_name, serve_once(b"HEAD", region, 0.3))

    assert received == b"HEAD" + path.read_bytes()[MIB : 11 * MIB] + b"END"
    assert region.descriptor == -1  # closed once sent
    if loop_name == "uvloop":
        # The socket refused part of the 10 MiB while the client was not reading: that
        # part was queued on the transport (the path this test is for).
        assert held > 0


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_region_waits_behind_bytes_the_transport_still_holds(
    loop_name: str, tmp_path: Path
) -> None:
    path = segment_file(tmp_path, 2 * MIB)
    region = FileRegion(os.open(path, os.O_RDONLY), 0, 2 * MIB)
    before = os.urandom(16 * MIB)  # more than the socket takes: the transport keeps the rest

    received, _ = run_on(loop_name, serve_once(before, region, 0.3))

    assert received == before + path.read_bytes() + b"END"


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_small_region_to_a_reading_client(loop_name: str, tmp_path: Path) -> None:
    path = segment_file(tmp_path, 4096)
    region = FileRegion(os.open(path, os.O_RDONLY), 100, 1000)

    received, held = run_on(loop_name, serve_once(b"", region, 0))

    assert received == path.read_bytes()[100:1100] + b"END"
    assert held == 0  # all of it went straight to the socket


class HoldingTransport:
    """A transport that still holds earlier bytes, over a real connected socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.queued: list[bytes] = []

    def get_extra_info(self, name: str) -> object:
        return self.sock if name == "socket" else None

    def get_write_buffer_size(self) -> int:
        return 1 + sum(map(len, self.queued))

    def write(self, data: bytes) -> None:
        self.queued.append(data)


def test_uvloop_path_never_sends_around_bytes_the_transport_holds(tmp_path: Path) -> None:
    path = segment_file(tmp_path, 4096)
    region = FileRegion(os.open(path, os.O_RDONLY), 0, 4096)
    sender, receiver = socket.socketpair()
    with sender, receiver:
        sender.setblocking(False)
        receiver.setblocking(False)
        transport = HoldingTransport(sender)

        run_on("uvloop", send_region(transport, region))  # type: ignore[arg-type]

        assert transport.queued == [path.read_bytes()]  # queued behind the held bytes
        with pytest.raises(BlockingIOError):
            receiver.recv(1)  # and nothing went to the socket directly
