"""Sans-io framing of the Kafka wire protocol.

Every request and response is ``int32 size`` followed by ``size`` bytes
(https://kafka.apache.org/protocol#protocol_common). ``frame_size`` checks a
size prefix. ``FrameReceiver`` splits the byte stream into frames the sans-io
way, for a transport that reads into the buffers it hands out, so large frames
are never copied in user space.
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
# A frame larger than this is read into parts of this size and joined once complete (one
# copy): a size prefix alone commits no more memory than this.
PART_BYTES = 1 << 20


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


class FrameReceiver:
    """The receive side of the framing for a reader that fills buffers it is handed
    (asyncio's BufferedProtocol): ``buffer()`` is where the next bytes go,
    ``received(count)`` says how many arrived and returns the frames completed.

    Small frames are cut out of a staging buffer, one copy each. A frame larger
    than half of it gets a buffer of its own that the rest of the frame is read
    into directly, so the bytes of a large produce request are copied only by the
    kernel (frames over PART_BYTES are read in parts and joined, one copy).

    A size prefix no valid request can have sets ``error`` (a FrameError) after
    the frames before it are returned; nothing is read after that.

    With ``admit_each``, each frame stops at its size prefix: ``wanted`` says its size and
    nothing of its body is taken until ``admit()`` (the broker's memory budget,
    server/request_budget.py, decides when its bytes may be read).
    """

    # One per connection, and most connections are idle: no instance dict.
    __slots__ = (
        "_admit_each",
        "_admitted",
        "_end",
        "_filled",
        "_max_frame_size",
        "_missing",
        "_parts",
        "_stage",
        "_staging_bytes",
        "_start",
        "error",
        "wanted",
    )

    def __init__(
        self, max_frame_size: int, staging_bytes: int = 1 << 14, *, admit_each: bool = False
    ) -> None:
        self._max_frame_size = max_frame_size
        self._staging_bytes = staging_bytes
        self._admit_each = admit_each
        # The size of the frame whose prefix has been read and that waits for admit().
        self.wanted: int | None = None
        self._admitted = not admit_each  # the frame at the staging buffer's start may be read
        # Allocated when a read begins and dropped once every staged byte is consumed,
        # so an idle connection holds no buffer (500 idle connections, benchmarks/).
        self._stage = bytearray()
        self._start = 0  # the first unconsumed staged byte
        self._end = 0  # the end of the staged bytes
        # A large frame being read in place: its parts (one, unless it exceeds PART_BYTES:
        # memory is committed as bytes arrive, not on a size prefix alone), how many bytes
        # the last part holds, and how many are still to come.
        self._parts: list[bytearray] = []
        self._filled = 0
        self._missing = 0
        self.error: FrameError | None = None

    def limit(self, max_frame_size: int) -> None:
        """Frames from now on may be at most ``max_frame_size`` bytes (a connection not yet
        authenticated is held to SASL's bound, then to the broker's)."""
        self._max_frame_size = max_frame_size

    def buffer(self) -> memoryview:
        """Where the next received bytes go (never empty while no error is set)."""
        if self._missing:
            if self._filled == len(self._parts[-1]):
                self._parts.append(bytearray(min(self._missing, PART_BYTES)))
                self._filled = 0
            return memoryview(self._parts[-1])[self._filled :]
        if not self._stage:
            self._stage = bytearray(self._staging_bytes)
        if self._start and len(self._stage) - self._end < len(self._stage) // 4:
            self._compact()
        if self._end == len(self._stage):
            # Only while a frame waits for admission and its reader did not stop reading:
            # nothing may be lost, so the staging buffer grows.
            self._stage = self._stage + bytearray(len(self._stage))
        return memoryview(self._stage)[self._end :]

    def received(self, count: int) -> list[bytes | bytearray]:
        """Takes note of ``count`` bytes written into the last buffer; returns the frames
        now complete, in order."""
        if self._missing:
            self._filled += count
            self._missing -= count
            if self._missing:
                return []
            parts, self._parts = self._parts, []
            return [parts[0] if len(parts) == 1 else b"".join(parts)]
        self._end += count
        return self._cut_frames()

    def admit(self) -> list[bytes | bytearray]:
        """The frame ``wanted`` announced may be read (``admit_each``); returns the frames
        now complete, in order (the next one may be ``wanted`` in turn)."""
        if self.wanted is None:
            raise RuntimeError("no frame waits for admission")
        self.wanted = None
        self._admitted = True
        return self._cut_frames()

    def _cut_frames(self) -> list[bytes | bytearray]:
        frames: list[bytes | bytearray] = []
        while (
            self.error is None
            and self.wanted is None
            and self._end - self._start >= FRAME_SIZE_LENGTH
        ):
            body = self._start + FRAME_SIZE_LENGTH
            try:
                size = frame_size(memoryview(self._stage)[self._start : body], self._max_frame_size)
            except FrameError as error:
                self.error = error
                break
            if not self._admitted:
                self.wanted = size
                break
            available = self._end - body
            if available >= size:
                frames.append(bytes(self._stage[body : body + size]))
                self._start = body + size
                self._admitted = not self._admit_each
            else:
                if size > len(self._stage) // 2:
                    self._read_in_place(size, body, available)
                    self._admitted = not self._admit_each
                break
        if self._start == self._end:
            self._stage, self._start, self._end = bytearray(), 0, 0
        return frames

    def _read_in_place(self, size: int, body: int, available: int) -> None:
        first = bytearray(min(size, max(PART_BYTES, available)))
        first[:available] = memoryview(self._stage)[body : self._end]
        self._parts, self._filled, self._missing = [first], available, size - available
        self._stage, self._start, self._end = bytearray(), 0, 0

    def _compact(self) -> None:
        pending = self._end - self._start
        self._stage[:pending] = self._stage[self._start : self._end]
        self._start, self._end = 0, pending


def frame(payload_parts: list[PartT]) -> list[PartT | bytes]:
    """Returns the parts (anything with a length) prefixed with their total size."""
    size = sum(len(part) for part in payload_parts)
    return [FRAME_SIZE.pack(size), *payload_parts]
