"""Sans-io cutting of a relayed byte stream into frames, without holding most of them.

A relay must know where each frame starts (to read its header) but need not hold a frame
to forward it: after the first bytes of a frame have been read, ``decide`` says whether the
rest goes through as it arrives (PASS: a 1 MiB Fetch answer is forwarded piece by piece,
never gathered) or the whole frame is gathered for rewriting (HOLD), or that it needs more
of the frame to tell (MORE). Frames are ``int32 size`` then ``size`` bytes
(https://kafka.apache.org/protocol#protocol_common).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from kshim.protocol.framing import FRAME_SIZE, FRAME_SIZE_LENGTH, FrameError

# How much of a frame ``decide`` first sees: a Produce request's header, transactional id
# and acks when its client and transactional ids are not longer than about 230 bytes.
PEEK_BYTES = 256


class Verdict(enum.Enum):
    PASS = enum.auto()
    HOLD = enum.auto()
    MORE = enum.auto()


@dataclass(frozen=True, slots=True)
class Held:
    """A whole frame gathered for rewriting: its bytes after the size prefix."""

    payload: bytes


# (the frame's first bytes after its size, the frame's size) -> what to do with it. MORE
# is not an answer once the first bytes are the whole frame.
Decide = Callable[[bytes | memoryview, int], Verdict]
Piece = bytes | memoryview | Held


class Splitter:
    """One direction of one relayed connection. ``feed`` returns, in order, the bytes to
    forward as they are and the frames held whole. Raises FrameError for a size prefix
    outside [min_size, max_size]; nothing is fed after that."""

    __slots__ = (
        "_decide",
        "_head",
        "_holding",
        "_max_size",
        "_min_size",
        "_passing",
        "_size",
        "_whole_wanted",
        "completed",
    )

    def __init__(self, decide: Decide, min_size: int, max_size: int) -> None:
        self._decide = decide
        self._min_size = min_size
        self._max_size = max_size
        self._head = bytearray()  # the current frame's bytes not yet handed on, size first
        self._size = -1  # the current frame's size, once its prefix is in
        self._passing = 0  # bytes of the current frame still to forward as they come
        self._holding = False  # the frame is gathered whole and handed on as Held
        self._whole_wanted = False  # decide said MORE: gather it whole, then ask again
        # Frames handed on to their end: a relay answering some requests itself writes its
        # answer once every earlier answer has gone out whole (relay.py).
        self.completed = 0

    def feed(self, data: bytes) -> list[Piece]:
        pieces: list[Piece] = []
        view = memoryview(data)
        position = 0
        while position < len(view):
            if self._passing:
                take = min(self._passing, len(view) - position)
                pieces.append(view[position : position + take])
                self._passing -= take
                position += take
                if not self._passing:
                    self.completed += 1
                continue
            if self._size < 0 and not self._head:
                position = self._whole_frames(data, view, position, pieces)
                if position == len(view):
                    break
            position = self._gather(view, position)
            self._settle(pieces)
        return pieces

    def _whole_frames(
        self, data: bytes, view: memoryview, position: int, pieces: list[Piece]
    ) -> int:
        """The common case, read in place: frames lying whole in ``data`` from ``position``
        (a client's request, a broker's small answer) are decided without being copied, and
        a run of passed ones handed on as one slice. Returns where the first frame not
        whole in ``data`` starts."""
        start = position
        while position + FRAME_SIZE_LENGTH <= len(data):
            (size,) = FRAME_SIZE.unpack_from(data, position)
            end = position + FRAME_SIZE_LENGTH + size
            if end > len(data) or not self._min_size <= size <= self._max_size:
                break  # gathered, or refused, as bytes arrive
            body = position + FRAME_SIZE_LENGTH
            verdict = self._decide(data[body : body + min(size, PEEK_BYTES)], size)
            if verdict is Verdict.MORE:
                verdict = self._decide(view[body:end], size)
                if verdict is Verdict.MORE:
                    raise FrameError("a frame too short for what its header says")
            if verdict is Verdict.HOLD:
                if position > start:
                    pieces.append(view[start:position])
                pieces.append(Held(data[body:end]))
                start = end
            position = end
            self.completed += 1
        if position > start:
            pieces.append(view[start:position] if start or position < len(data) else data)
        return position

    def _gather(self, view: memoryview, position: int) -> int:
        """Adds to the head what the current step needs; returns the new position."""
        if self._size < 0:
            wanted = FRAME_SIZE_LENGTH
        elif self._holding or self._whole_wanted:
            wanted = FRAME_SIZE_LENGTH + self._size
        else:
            wanted = FRAME_SIZE_LENGTH + min(self._size, PEEK_BYTES)
        take = min(max(wanted - len(self._head), 0), len(view) - position)
        self._head += view[position : position + take]
        return position + take

    def _settle(self, pieces: list[Piece]) -> None:
        """Decides what it can with the head gathered so far."""
        if self._size < 0:
            if len(self._head) < FRAME_SIZE_LENGTH:
                return
            (size,) = FRAME_SIZE.unpack_from(self._head)
            if not self._min_size <= size <= self._max_size:
                raise FrameError(f"frame size {size} outside [{self._min_size}, {self._max_size}]")
            self._size = size
        body = len(self._head) - FRAME_SIZE_LENGTH
        whole = body == self._size
        if not self._holding:
            if not whole and (self._whole_wanted or body < PEEK_BYTES):
                return
            verdict = self._decide(bytes(self._head[FRAME_SIZE_LENGTH:]), self._size)
            if verdict is Verdict.PASS:
                pieces.append(bytes(self._head))
                self._passing = self._size - body
                if not self._passing:
                    self.completed += 1
                self._next_frame()
                return
            if verdict is Verdict.MORE:
                if whole:
                    raise FrameError("a frame too short for what its header says")
                self._whole_wanted = True
                return
            self._holding = True
        if whole:
            pieces.append(Held(bytes(self._head[FRAME_SIZE_LENGTH:])))
            self.completed += 1
            self._next_frame()

    def _next_frame(self) -> None:
        self._head = bytearray()
        self._size = -1
        self._holding = False
        self._whole_wanted = False
