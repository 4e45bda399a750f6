"""Sends a stored file region to a client's socket, zero-copy where the loop allows.

asyncio's own loops implement ``loop.sendfile``. uvloop's transports do not (it raises
NotImplementedError), so there the region goes to the socket with ``os.sendfile``
directly, which keeps the bytes in order as long as the transport has nothing queued
ahead of them. Whatever the socket does not take at once (its send buffer is full: a
client slow to read) is read into memory and queued on the transport, which then waits
for the socket as it does for every other response.

Only for plaintext transports: over TLS the bytes are encrypted in user space, and
encrypted_sender.py writes them (sendfile would put plaintext on the encrypted stream).
"""

from __future__ import annotations

import asyncio
import os

from kshim.storage.interface import FileRegion


class RegionShortened(Exception):
    """The file ended before the region did (cut short on disk since the read was planned).
    The response's size went out ahead of it, so the bytes after it would be taken for the
    missing ones: the connection must close (the per-connection loop closes it)."""

    def __init__(self, region: FileRegion, sent: int) -> None:
        super().__init__(f"a segment file ended {sent} bytes into a {region.length}-byte "
                         f"region at byte {region.position}")  # fmt: skip


async def send_region(transport: asyncio.Transport, region: FileRegion) -> None:
    """Writes the region after everything already written; closes it. Raises
    RegionShortened when the file holds less than the region."""
    try:
        if transport.get_extra_info("ssl_object") is not None:
            raise ValueError("a file region over TLS goes through encrypted_sender")
        loop = asyncio.get_running_loop()
        if isinstance(loop, asyncio.BaseEventLoop):
            file = region.as_file()
            sent = await loop.sendfile(transport, file, region.position, region.length)
        else:
            sent = _sendfile_while_taken(transport, region)
            if sent < region.length:
                # Blocks the loop while it reads, as os.sendfile above and asyncio's
                # sendfile do; segment data is usually in the page cache.
                rest = region.read_from(sent)
                transport.write(rest)
                sent += len(rest)
        if sent < region.length:
            raise RegionShortened(region, sent)
    finally:
        region.close()


def _sendfile_while_taken(transport: asyncio.Transport, region: FileRegion) -> int:
    """Bytes of the region the socket took without waiting; 0 when the transport still
    holds earlier bytes (sending around them would reorder the stream)."""
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_write_buffer_size() > 0:
        return 0
    descriptor = sock.fileno()
    sent = 0
    while sent < region.length:
        try:
            count = os.sendfile(
                descriptor, region.descriptor, region.position + sent, region.length - sent
            )
        except (BlockingIOError, InterruptedError):
            break
        if count == 0:  # the file is shorter than the region: nothing more to send
            break
        sent += count
    return sent
