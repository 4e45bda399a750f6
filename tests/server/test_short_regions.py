"""A file region whose segment file was cut short on disk after the read was planned: the
senders raise RegionShortened (and the connection closes) rather than send fewer bytes than
the response's size promised, which would have the client take the next bytes for them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from kshim.cli.event_loop import run_on
from kshim.server.encrypted_sender import write_encrypted
from kshim.server.region_sender import RegionShortened, send_region
from kshim.storage.interface import FileRegion

LOOPS = ["asyncio", "uvloop"]  # kshim.event.loop's choices
FILE_BYTES = 4096


def short_region(tmp_path: Path) -> FileRegion:
    """A region of 3000 bytes from byte 2000 of a 4096-byte file."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(FILE_BYTES))
    return FileRegion(os.open(path, os.O_RDONLY), 2000, 3000)


async def send_to_a_client(region: FileRegion) -> tuple[BaseException | None, bytes]:
    """send_region to a connected client; returns what it raised and what the client got."""
    raised: list[BaseException | None] = []

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await send_region(writer.transport, region)  # type: ignore[arg-type]
            raised.append(None)
        except RegionShortened as error:
            raised.append(error)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    server.close()
    await server.wait_closed()
    return raised[0], received


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_region_past_the_end_of_its_file_is_refused(loop_name: str, tmp_path: Path) -> None:
    region = short_region(tmp_path)
    error, received = run_on(loop_name, send_to_a_client(region))
    assert isinstance(error, RegionShortened)
    assert "2096 bytes into a 3000-byte region at byte 2000" in str(error)
    assert len(received) == FILE_BYTES - 2000
    assert region.descriptor == -1  # closed all the same


class CollectingTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return False


def test_an_encrypted_send_of_a_region_past_the_end_is_refused(tmp_path: Path) -> None:
    region = short_region(tmp_path)
    transport = CollectingTransport()
    with pytest.raises(RegionShortened):
        run_on("asyncio", write_encrypted(transport, [b"head", region]))  # type: ignore[arg-type]
    assert transport.written == [b"head"]
    region.close()
