"""Requests a gateway answers itself (or prepares before relaying), kept in their turn.

Kafka answers a connection's requests in order, and clients match answers to requests by
that order as much as by correlation id (docs/protocol-notes.md §3.3). So an answer made
by the gateway (a read of ``T.full``, full/answers.py) goes to the client only once every
earlier request's answer from the upstream has gone out to its last byte, and the requests
after it go upstream only once it has: the upstream then answers them after it. A request
to prepare (a Metadata request naming a view whose placeholder topic must exist first) is
relayed once its preparation ends, and the requests behind it wait for it the same way.
While nothing is waiting, requests go upstream as they come, as before.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kshim.gateway.full.requests import Decoded, Route, Routing
from kshim.gateway.splitter import Piece
from kshim.protocol.framing import FRAME_SIZE

log = logging.getLogger(__name__)


class Served(Protocol):
    """What the gateway serves itself (full/service.py)."""

    def route(self, head: bytes | memoryview, size: int) -> Routing: ...

    async def answer(self, request: Decoded) -> bytes | None:
        """The answer (header and body, without the size) to a request ``route`` decoded;
        None where none is sent (a refused raw SASL token: the connection then closes)."""
        ...

    @property
    def closing(self) -> bool:
        """Whether the connection ends once the answer just made has gone out (a failed
        login, client_login.py)."""
        ...

    async def prepare(self, request: Decoded) -> None:
        """What must happen before the request is relayed."""
        ...


@dataclass(eq=False, slots=True)
class Step:
    """A request held for the gateway: ``after`` upstream answers come before its own."""

    route: Route
    after: int
    request: Decoded  # as ``Served.route`` decoded it
    payload: bytes = b""  # the request's bytes, relayed once a PREPARE step is done
    task: asyncio.Task[bytes | None] | None = None


class _Upstream(Protocol):
    @property
    def answers_completed(self) -> int: ...

    def write(self, pieces: list[Piece]) -> None: ...


class _Client(Protocol):
    @property
    def upstream(self) -> _Upstream: ...

    def write(self, pieces: list[bytes | memoryview]) -> None: ...

    def close(self) -> None: ...


class LocalSteps:
    """One client connection's requests from the first held one on, in order."""

    def __init__(self, client: _Client, served: Served | None) -> None:
        self._client = client
        self._served = served
        self._queue: collections.deque[Piece | Step] = collections.deque()

    @property
    def waiting(self) -> bool:
        """Whether requests are held behind a step."""
        return bool(self._queue)

    def relay(self, pieces: Sequence[Piece | Step]) -> None:
        """Relays ``pieces`` (a client's requests, in order), holding what follows a step."""
        self._queue.extend(pieces)
        self.advance()

    def advance(self) -> None:
        """Sends on whatever no step holds back any more (called as steps end and as the
        upstream's answers go out)."""
        out: list[Piece] = []
        while self._queue:
            head = self._queue[0]
            if not isinstance(head, Step):
                out.append(head)
                self._queue.popleft()
                continue
            if out:
                self._client.upstream.write(out)
                out = []
            if not self._done(head):
                break
            self._queue.popleft()
        if out:
            self._client.upstream.write(out)

    def _done(self, step: Step) -> bool:
        """Whether ``step`` has gone out (answered, or relayed once prepared)."""
        if step.task is None:
            step.task = asyncio.get_running_loop().create_task(self._run(step))
            step.task.add_done_callback(self._ended)
        if not step.task.done():
            return False
        if step.route is Route.PREPARE:
            self._client.upstream.write([_framed(step.payload)])
            return True
        if self._client.upstream.answers_completed < step.after:
            return False
        assert self._served is not None  # steps are made only where something is served
        answer = step.task.result()
        if answer is not None:
            self._client.write([_framed(answer)])
        if self._served.closing:  # the answer is written: closing sends it first
            self.cancel()
            self._client.close()
            return False
        return True

    async def _run(self, step: Step) -> bytes | None:
        assert self._served is not None  # steps are made only where something is served
        if step.route is Route.ANSWER:
            return await self._served.answer(step.request)
        try:
            await self._served.prepare(step.request)
        except Exception as error:  # relayed anyway: the cluster answers what it can
            log.warning("relaying a request unprepared: %s", error)
        return None

    def _ended(self, task: asyncio.Task[bytes | None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.warning("closing a gateway connection: a request it answers: %r", error)
            self.cancel()
            self._client.close()
            return
        self.advance()

    def cancel(self) -> None:
        """The connection has ended: nothing more goes out."""
        for item in self._queue:
            if isinstance(item, Step) and item.task is not None:
                item.task.cancel()
        self._queue.clear()


def _framed(payload: bytes) -> bytes:
    return FRAME_SIZE.pack(len(payload)) + payload
