"""Sans-io framing of the Kafka wire protocol.

Every request and response is ``int32 size`` followed by ``size`` bytes
(https://kafka.apache.org/protocol#protocol_common). ``frame_size`` checks a
size prefix; the server reads each body straight from its stream with it.
``FrameDecoder`` splits a byte stream the sans-io way (h11's ``feed`` then
``next_frame``) with the same check; the server no longer uses it, since its
own buffer cost extra copies of every produced byte.
"""

from __future__ import annotations

import struct
from collections.abc import Sized
from typing import TypeVar

PartT = TypeVar("PartT", bound=Sized)

FRAME_SIZE = struct.Struct(">i")
FRAME_SIZE_LENGTH = FRAME_SIZE.size
# The smallest well-formed request: api_key(2) + api_version(2) + correlation_id(4)
# + client_id length(2).
MIN_REQUEST_SIZE = 10


class FrameError(Exception):
    """The peer broke the framing rules; the only safe answer is to close the connection."""


def frame_size(prefix: bytes | bytearray | memoryview, max_frame_size: int) -> int:
    """The body size a frame's 4-byte prefix announces.

    Raises FrameError for a size no valid request can have: below the minimum request or
    above ``max_frame_size`` (Kafka's ``socket.request.max.bytes``).
    """
    (size,) = FRAME_SIZE.unpack_from(prefix)
    if size < MIN_REQUEST_SIZE or size > max_frame_size:
        raise FrameError(f"frame size {size} outside [{MIN_REQUEST_SIZE}, {max_frame_size}]")
    return int(size)


class FrameDecoder:
    """Splits a byte stream into Kafka frames.

    ``max_frame_size`` mirrors Kafka's ``socket.request.max.bytes``: a size
    prefix above it (or below the minimum request size) is a broken frame.
    """

    def __init__(self, max_frame_size: int) -> None:
        self._max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._position = 0

    def feed(self, data: bytes) -> None:
        """Appends bytes received from the peer."""
        self._buffer += data

    def buffered_bytes(self) -> int:
        """Returns how many received bytes are not yet handed out as frames."""
        return len(self._buffer) - self._position

    def next_frame(self) -> bytes | None:
        """Returns the next complete frame body, or None when more bytes are needed.

        Raises FrameError for a size prefix that no valid request can have.
        """
        available = len(self._buffer) - self._position
        if available < FRAME_SIZE_LENGTH:
            self._compact()
            return None
        prefix_end = self._position + FRAME_SIZE_LENGTH
        size = frame_size(self._buffer[self._position : prefix_end], self._max_frame_size)
        if available < FRAME_SIZE_LENGTH + size:
            self._compact()
            return None
        start = self._position + FRAME_SIZE_LENGTH
        frame = bytes(self._buffer[start : start + size])
        self._position = start + size
        return frame

    def _compact(self) -> None:
        # Drop consumed bytes only when waiting for more, so a burst of
        # pipelined requests is sliced without repeated buffer moves.
        if self._position:
            del self._buffer[: self._position]
            self._position = 0


def frame(payload_parts: list[PartT]) -> list[PartT | bytes]:
    """Returns the parts (anything with a length) prefixed with their total size."""
    size = sum(len(part) for part in payload_parts)
    return [FRAME_SIZE.pack(size), *payload_parts]
