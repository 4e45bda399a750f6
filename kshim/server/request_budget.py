"""The broker-wide budget of request bytes read and not yet handled
(``queued.max.request.bytes``).

Kafka's SocketServer takes each request's buffer from one memory pool of
``queued.max.request.bytes`` (SimpleMemoryPool): a connection that has read a size prefix
allocates the body from the pool before reading it, and while the pool is empty its
channels stop reading, so the bytes stay in the kernel's socket buffers and TCP's flow
control pushes back on the clients. The buffer goes back to the pool once the request's
handler has run (KafkaRequestHandler releases it in a ``finally``), not when the answer
is written: a client that does not read its answers then holds no pool memory.

kshim does the same for every frame over 16 KiB (request_stream.py asks here before
reading its body; smaller ones are read with their size prefix and bounded per connection).
Waiting reservations are granted first-in, first-out, so a large request is not passed over
forever by smaller ones. A request larger than the whole budget is granted when nothing else
is held, so that it is served rather than refused (Kafka's pool is not strict either: it
grants while any memory is left, so it can pass its bound by one request); the bytes held
thus never exceed the larger of the budget and one request, itself at most
``socket.request.max.bytes``.

Threads: the event loop's thread only.
"""

from __future__ import annotations

import collections
from collections.abc import Callable


class Grant:
    """``size`` bytes of the budget, held until ``release`` (which may be called again);
    of no budget when ``budget`` is None."""

    __slots__ = ("_budget", "size")

    def __init__(self, budget: RequestBudget | None, size: int) -> None:
        self._budget: RequestBudget | None = budget
        self.size = size

    def release(self) -> None:
        budget, self._budget = self._budget, None
        if budget is not None:
            budget._give_back(self.size)


class Waiting:
    """A reservation not granted yet: ``on_granted`` is called with its Grant once it is,
    unless it is cancelled first."""

    __slots__ = ("_budget", "on_granted", "size")

    def __init__(self, budget: RequestBudget, size: int, on_granted: Callable[[Grant], None]):
        self._budget: RequestBudget | None = budget
        self.size = size
        self.on_granted = on_granted

    def cancel(self) -> None:
        budget, self._budget = self._budget, None
        if budget is not None:
            budget._cancel(self)


class RequestBudget:
    def __init__(self, capacity: int | None) -> None:
        """``capacity`` bytes in all; None for no bound (Kafka's -1)."""
        self.capacity = capacity
        self.in_use = 0
        self.high_water = 0  # the most bytes held at once since the broker started
        self.waited = 0  # reservations that had to wait, since the broker started
        self._waiting: collections.deque[Waiting] = collections.deque()

    @property
    def waiting(self) -> int:
        """Connections waiting for their next request's bytes (one reservation each)."""
        return len(self._waiting)

    def reserve(self, size: int, on_granted: Callable[[Grant], None]) -> Grant | Waiting:
        """A Grant of ``size`` bytes now, or a Waiting whose ``on_granted`` is called with
        it later (from whichever call gives bytes back)."""
        if not self._waiting and self._fits(size):
            return self._grant(size)
        waiting = Waiting(self, size, on_granted)
        self._waiting.append(waiting)
        self.waited += 1
        return waiting

    def _fits(self, size: int) -> bool:
        return self.capacity is None or self.in_use == 0 or self.in_use + size <= self.capacity

    def _grant(self, size: int) -> Grant:
        self.in_use += size
        self.high_water = max(self.high_water, self.in_use)
        return Grant(self, size)

    def _give_back(self, size: int) -> None:
        self.in_use -= size
        self._grant_waiting()

    def _cancel(self, waiting: Waiting) -> None:
        was_first = bool(self._waiting) and self._waiting[0] is waiting
        self._waiting.remove(waiting)
        if was_first:  # it may have held back smaller reservations behind it
            self._grant_waiting()

    def _grant_waiting(self) -> None:
        # Taken off the queue before its callback runs: the callback may reserve again.
        while self._waiting and self._fits(self._waiting[0].size):
            waiting = self._waiting.popleft()
            waiting._budget = None
            waiting.on_granted(self._grant(waiting.size))
