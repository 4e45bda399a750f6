"""write_encrypted on both event loops: a response's bytes and file regions arrive over
TLS whole and in order, also to a client that reads late behind a small receive buffer
(the transport then holds encrypted bytes); written in pieces of at most PIECE_BYTES with
the loop let run between them, and given up once the transport closes."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import ssl
from pathlib import Path

import pytest
import trustme

from kshim.cli.event_loop import run_on
from kshim.protocol.fetch_response import Part
from kshim.server.encrypted_sender import PIECE_BYTES, write_encrypted
from kshim.server.region_sender import send_region
from kshim.storage.interface import FileRegion

LOOPS = ["asyncio", "uvloop"]  # kshim.event.loop's choices
MIB = 1 << 20


@pytest.fixture(scope="module")
def contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    authority = trustme.CA()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("localhost").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


async def serve_once(
    parts: list[Part], contexts: tuple[ssl.SSLContext, ssl.SSLContext], client_delay_s: float
) -> bytes:
    """A TLS server writes ``parts`` with write_encrypted, then b"END", to one client that
    starts reading after ``client_delay_s``; returns what the client read."""
    server_context, client_context = contexts

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await write_encrypted(writer.transport, parts)  # type: ignore[arg-type]
        writer.write(b"END")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    client.setblocking(False)
    await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(
        sock=client, ssl=client_context, server_hostname="localhost"
    )
    await asyncio.sleep(client_delay_s)
    received = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    server.close()
    await server.wait_closed()
    return received


@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("client_delay_s", [0.0, 0.3])
def test_bytes_and_regions_arrive_whole_and_in_order(
    loop_name: str,
    client_delay_s: float,
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
    tmp_path: Path,
) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(5 * MIB))
    stored = path.read_bytes()
    large = os.urandom(3 * PIECE_BYTES + 17)
    parts: list[Part] = [
        b"HEAD",
        memoryview(large)[5:],
        FileRegion(os.open(path, os.O_RDONLY), 7, 3 * MIB + 1),  # not a whole piece
        b"",
        FileRegion(os.open(path, os.O_RDONLY), 4 * MIB, PIECE_BYTES),  # exactly one
        FileRegion(os.open(path, os.O_RDONLY), 5 * MIB - 10, 10),  # the file's last bytes
    ]

    received = run_on(loop_name, serve_once(parts, contexts, client_delay_s))
    for part in parts:
        if isinstance(part, FileRegion):
            part.close()

    expected = b"HEAD" + large[5:] + stored[7 : 7 + 3 * MIB + 1]
    expected += stored[4 * MIB : 4 * MIB + PIECE_BYTES] + stored[-10:] + b"END"
    assert received == expected


class RecordingTransport:
    """Keeps the size of every write (what a TLS transport would be asked to encrypt) and
    how many turns another task had had by then; closes after ``close_after`` writes."""

    def __init__(self, close_after: int = 1 << 30) -> None:
        self.writes: list[int] = []
        self.turns_at_write: list[int] = []
        self.turns = 0
        self.close_after = close_after

    def write(self, data: bytes | memoryview) -> None:
        self.writes.append(len(data))
        self.turns_at_write.append(self.turns)

    def is_closing(self) -> bool:
        return len(self.writes) >= self.close_after

    def get_extra_info(self, name: str) -> object:
        return object() if name == "ssl_object" else None


async def write_while_counting_turns(transport: RecordingTransport, parts: list[Part]) -> None:
    async def other_connection() -> None:
        while True:
            transport.turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_connection())
    try:
        await write_encrypted(transport, parts)  # type: ignore[arg-type]
    finally:
        other.cancel()


def test_pieces_are_bounded_and_the_loop_runs_between_them(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(2 * MIB))
    transport = RecordingTransport()
    region = FileRegion(os.open(path, os.O_RDONLY), 1, 2 * MIB - 1)
    parts: list[Part] = [os.urandom(PIECE_BYTES + 1), region, b"tail"]

    asyncio.run(write_while_counting_turns(transport, parts))
    region.close()

    assert max(transport.writes) == PIECE_BYTES
    assert sum(transport.writes) == PIECE_BYTES + 1 + 2 * MIB - 1 + 4
    pieces_of_region = -(-(2 * MIB - 1) // PIECE_BYTES)
    assert len(transport.writes) == 2 + pieces_of_region + 1
    # Within a part, the other task ran before each piece after the first.
    region_turns = transport.turns_at_write[2 : 2 + pieces_of_region]
    assert all(later > earlier for earlier, later in itertools.pairwise(region_turns))


def test_a_transport_closed_midway_gets_no_more_pieces(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(MIB))
    transport = RecordingTransport(close_after=3)
    region = FileRegion(os.open(path, os.O_RDONLY), 0, MIB)

    with pytest.raises(ConnectionResetError):
        asyncio.run(write_while_counting_turns(transport, [region, b"after"]))
    region.close()

    assert len(transport.writes) == 3


def test_send_region_refuses_a_tls_transport(tmp_path: Path) -> None:
    """sendfile on a TLS connection would put plaintext on the encrypted stream."""
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 100)
    region = FileRegion(os.open(path, os.O_RDONLY), 0, 100)

    with pytest.raises(ValueError, match="encrypted_sender"):
        run_on("asyncio", send_region(RecordingTransport(), region))  # type: ignore[arg-type]

    assert region.descriptor == -1  # closed all the same
