"""Writes a response through a TLS transport in pieces, letting the loop run between them.

Over TLS the bytes are encrypted in user space, so a stored file region is read into
memory (sendfile would put plaintext on the encrypted stream). asyncio's and uvloop's TLS
transports encrypt a write at once into a memory BIO and queue everything it holds as one
new bytes object, which reaches the socket only when the loop next runs. A fetch answer of
1 MiB written whole so costs:

- two fresh 1 MiB buffers per answer (the file's bytes, their encryption). Buffers that
  large are above glibc's mmap threshold, or fall to its heap trimming, so their pages are
  mapped, zeroed and faulted in for every answer: about 480 page faults a MiB;
- no overlap: the client starts decrypting only once the broker has encrypted all of it.
  A consumer fetches one answer at a time, so both costs add up in every round.

Written in pieces of PIECE_BYTES, with the loop let run after each, the buffers come from
the heap again and again, each piece goes to the socket while the next is encrypted, and
other connections get their turn meanwhile: about a quarter less broker CPU a record
(docs/design.md, "Where the CPU goes, and why").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from kshim.protocol.fetch_response import Part
from kshim.server.region_sender import RegionShortened
from kshim.storage.interface import FileRegion

PIECE_BYTES = 128 * 1024


async def write_encrypted(transport: asyncio.Transport, parts: Sequence[Part]) -> None:
    """Writes the parts in order, file regions read piece by piece (a blocking read, as
    sendfile's: segment data is usually in the page cache); stops early if the transport
    closes. Closes no region: the caller does, sent or not."""
    for part in parts:
        if isinstance(part, FileRegion):
            await _write_region(transport, part)
        elif isinstance(part, bytes | bytearray | memoryview):
            await _write_bytes(transport, memoryview(part))
        else:
            raise TypeError(f"cannot send a {type(part).__name__}")


async def _write_region(transport: asyncio.Transport, region: FileRegion) -> None:
    for skip in range(0, region.length, PIECE_BYTES):
        if skip:
            await _let_loop_run(transport)
        piece = os.pread(
            region.descriptor, min(PIECE_BYTES, region.length - skip), region.position + skip
        )
        if len(piece) < min(PIECE_BYTES, region.length - skip):
            raise RegionShortened(region, skip + len(piece))  # the file is shorter
        transport.write(piece)


async def _write_bytes(transport: asyncio.Transport, data: memoryview) -> None:
    for start in range(0, len(data), PIECE_BYTES):
        if start:
            await _let_loop_run(transport)
        transport.write(data[start : start + PIECE_BYTES])


async def _let_loop_run(transport: asyncio.Transport) -> None:
    """One turn of the loop: the transport hands the previous piece to the socket."""
    await asyncio.sleep(0)
    if transport.is_closing():
        raise ConnectionResetError("connection closed while a response was being sent")
