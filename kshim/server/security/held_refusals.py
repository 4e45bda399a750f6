"""Refused connections held open, unread, for a while before they are closed.

A client refused by the failed-login throttle that is closed at once reconnects at once:
a guessing peer then costs the broker an accept and a close per attempt as fast as it can
loop, and costs its own host's cores too. Kafka closes connections over a per-address
connection-creation quota only after the quota's throttle time (KIP-612: the acceptor keeps
them in a queue of delayed closes); kshim holds a refused connection until its address would
be admitted again. A held connection costs a descriptor and a timer, nothing is read from it,
and at most ``limit`` are held at once: past that, refusals close at once again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Refused:
    """A new connection that is not served: closed after ``hold_s`` seconds (0: at once)."""

    hold_s: float


class HeldRefusals:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held: dict[asyncio.TimerHandle, Callable[[], None]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, close: Callable[[], None], seconds: float) -> None:
        """Calls ``close`` after ``seconds``, or at once when ``limit`` are held."""
        if seconds <= 0 or len(self._held) >= self._limit:
            close()
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def release() -> None:
            assert handle is not None
            del self._held[handle]
            close()

        handle = loop.call_later(seconds, release)
        self._held[handle] = close

    def close_all(self) -> None:
        """Closes every held connection now (the listener stops)."""
        held, self._held = self._held, {}
        for handle, close in held.items():
            handle.cancel()
            close()
