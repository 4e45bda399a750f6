"""One client connection relayed to one upstream broker connection, and back.

Two asyncio protocols joined back to back. Requests go upstream as they arrive, each
frame's header read on the way (requests.py) so that the answers, which Kafka sends in
request order, are known by API and version as they come back: the few that name brokers
are gathered and rewritten (answers.py), every other one is forwarded as its bytes arrive
(splitter.py). A Produce naming a delay companion (``T.delay``) is gathered whole and
checked by the broker's rules first (delay_screen.py): the partitions refused are taken out
of what goes upstream and answered in the upstream's answer to it. Requests that read a
full-data view ``T.full``, and a client's login where the gateway terminates SASL, are
answered by the gateway itself, in their turn among the upstream's answers
(local_steps.py, full/, client_login.py). Each side stops reading
while the other cannot keep up (asyncio's pause_writing), so a slow client slows its broker
connection rather than the gateway's memory. Either side closing closes the other.
Threads: the event loop's only.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import cast

from kshim.gateway import requests
from kshim.gateway.addresses import UnmappableBroker
from kshim.gateway.answers import REWRITTEN, AnswerRewriter, UnreadableAnswer
from kshim.gateway.delay_screen import DelayRules, merged_answer
from kshim.gateway.full.requests import RELAY, Route
from kshim.gateway.local_steps import LocalSteps, Served, Step
from kshim.gateway.splitter import Held, Piece, Splitter, Verdict
from kshim.protocol.framing import FRAME_SIZE, MIN_REQUEST_SIZE, FrameError
from kshim.protocol.headers import CORRELATION_ID
from kshim.protocol.primitives import DecodeError

log = logging.getLogger(__name__)
# Kafka's socket.request.max.bytes default bounds a request; an answer is bounded by what
# was asked (fetch.max.bytes and friends), so only a garbage size is refused.
MAX_REQUEST_BYTES = 100 * 1024 * 1024
MAX_ANSWER_BYTES = (1 << 31) - 1
MIN_ANSWER_SIZE = CORRELATION_ID.size


class RelayCounts:
    """What every relay of a gateway has done, for its metrics (the event loop's thread
    writes; a scrape reads plain integers)."""

    __slots__ = ("answers_rewritten", "connections", "requests", "upstream_failures")

    def __init__(self) -> None:
        self.connections = 0  # client connections accepted
        self.requests = 0
        self.answers_rewritten = 0
        self.upstream_failures = 0  # client connections closed for want of their broker


# Opens the upstream connection for a client connection: the relay's upstream protocol
# is passed in, the transport comes back.
ConnectUpstream = Callable[[asyncio.Protocol], Awaitable[asyncio.Transport]]


class ClientSide(asyncio.Protocol):
    """The client's connection to a gateway port. ``closed`` is told when it has ended."""

    def __init__(
        self,
        connect_upstream: ConnectUpstream,
        rewriter: AnswerRewriter,
        closed: Callable[[ClientSide], None],
        counts: RelayCounts,
        delay_rules: DelayRules,
        served: Served | None = None,
        views: bool = False,
    ) -> None:
        """``served``: what the gateway answers itself on this connection (a login, the
        full-data views); ``views``: whether those include the views."""
        self._connect_upstream = connect_upstream
        self._delay_rules = delay_rules
        self._served = served
        self._views = views
        # What each Held request becomes, in order: the request to send upstream in its
        # place, or a step answered or prepared by the gateway.
        self._held: collections.deque[bytes | Step] = collections.deque()
        self._upstream_answers = 0  # answers asked of the upstream so far
        self._counts = counts
        self._closed = closed
        self._pending: collections.deque[requests.Pending] = collections.deque()
        self._requests = Splitter(self._request_seen, MIN_REQUEST_SIZE, MAX_REQUEST_BYTES)
        self.upstream = UpstreamSide(self, self._pending, rewriter, counts)
        self.steps = LocalSteps(self, served)
        self.transport: asyncio.Transport | None = None
        self._connecting: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)
        self.transport.pause_reading()  # until the upstream connection is open
        self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        try:
            await self._connect_upstream(self.upstream)
        except Exception as error:  # unreachable upstream, unknown broker: this client ends
            self._counts.upstream_failures += 1
            log.info("closing a gateway connection: no upstream connection: %s", error)
            self.close()
            return
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        try:
            pieces = self._requests.feed(data)
        except FrameError as error:
            log.info("closing a gateway connection: %s", error)
            self.close()
            return
        if not self._held and not self.steps.waiting:  # nothing held: straight upstream
            self.upstream.write(pieces)
        elif not self._held:
            self.steps.relay(pieces)
        else:
            self.steps.relay(
                [self._use(piece) if isinstance(piece, Held) else piece for piece in pieces]
            )

    def _use(self, held: Held) -> Piece | Step:
        use = self._held.popleft()
        if isinstance(use, Step):
            use.payload = held.payload
            return use
        return FRAME_SIZE.pack(len(use)) + use

    def _request_seen(self, head: bytes | memoryview, size: int) -> Verdict:
        routing = RELAY if self._served is None else self._served.route(head, size)
        if routing.route is Route.MORE:
            return Verdict.MORE
        if routing.route is Route.ANSWER:
            assert routing.request is not None  # an ANSWER routing carries its request
            self._held.append(Step(Route.ANSWER, self._upstream_answers, routing.request))
            self._counts.requests += 1
            return Verdict.HOLD
        try:
            pending, names_delay = requests.inspect(head, self._views)
        except requests.NeedMore:
            return Verdict.MORE
        verdict = Verdict.PASS
        if routing.route is Route.PREPARE:
            assert routing.request is not None  # so does a PREPARE one
            self._held.append(Step(Route.PREPARE, self._upstream_answers, routing.request))
            verdict = Verdict.HOLD
        if routing.lists_all and pending is not None:
            pending = dataclasses.replace(pending, lists_all=True)
        if names_delay:
            if len(head) < size:  # checked whole, as it will be forwarded
                return Verdict.MORE
            try:
                screened = self._delay_rules.screen(head)
            except DecodeError as error:
                raise FrameError(f"a Produce to a delay topic: {error}") from error
            if screened.payload is not None:
                self._held.append(screened.payload)
                verdict = Verdict.HOLD
            if pending is not None:
                pending = dataclasses.replace(pending, refused=screened.refused)
        if pending is not None:
            self._pending.append(pending)
            self._upstream_answers += 1
        self._counts.requests += 1
        return verdict

    def write(self, pieces: list[bytes | memoryview]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(pieces)

    def pause_writing(self) -> None:
        self.upstream.pause_reading()

    def resume_writing(self) -> None:
        self.upstream.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.upstream.close()
        self.steps.cancel()
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        self._closed(self)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.upstream.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.upstream.close()


class UpstreamSide(asyncio.Protocol):
    """The gateway's connection to the upstream broker on behalf of one client."""

    def __init__(
        self,
        client: ClientSide,
        pending: collections.deque[requests.Pending],
        rewriter: AnswerRewriter,
        counts: RelayCounts,
    ) -> None:
        self._client = client
        self._counts = counts
        self._pending = pending
        self._rewriter = rewriter
        self._answers = Splitter(self._answer_seen, MIN_ANSWER_SIZE, MAX_ANSWER_BYTES)
        # The requests of the answers held whole, in order: one read can bring several.
        self._held_for: collections.deque[requests.Pending] = collections.deque()
        self.transport: asyncio.Transport | None = None
        # Requests read before the connection is made: the client's reading is paused until
        # then, but a loop may deliver what it had already read.
        self._early: list[bytes | memoryview] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)
        if self._early:
            self.transport.writelines(self._early)
            self._early = []

    def write(self, pieces: list[Piece]) -> None:
        # Held requests were replaced (ClientSide.data_received).
        out = [piece for piece in pieces if not isinstance(piece, Held)]
        if self.transport is None:
            self._early += out
        elif not self.transport.is_closing():
            self.transport.writelines(out)

    def data_received(self, data: bytes) -> None:
        try:
            pieces = self._answers.feed(data)
            out = [self._rewritten(piece) if isinstance(piece, Held) else piece for piece in pieces]
        except (FrameError, UnreadableAnswer, UnexpectedAnswer, UnmappableBroker, OSError) as error:
            # OSError: a new broker's gateway port could not be bound.
            log.warning("closing a gateway connection: its broker's answer: %s", error)
            self._client.close()
            return
        self._client.write(out)
        if self._client.steps.waiting:
            self._client.steps.advance()

    @property
    def answers_completed(self) -> int:
        """The upstream's answers forwarded to the client to their last byte."""
        return self._answers.completed

    def _answer_seen(self, head: bytes | memoryview, size: int) -> Verdict:
        if not self._pending:
            raise UnexpectedAnswer("an answer to no request")
        pending = self._pending.popleft()
        (correlation_id,) = CORRELATION_ID.unpack_from(head)
        if correlation_id != pending.correlation_id:
            raise UnexpectedAnswer(
                f"correlation id {correlation_id}, expected {pending.correlation_id}"
            )
        if pending.api_key in REWRITTEN or pending.refused:
            self._held_for.append(pending)
            return Verdict.HOLD
        return Verdict.PASS

    def _rewritten(self, held: Held) -> bytes:
        pending = self._held_for.popleft()
        if pending.refused:
            payload = merged_answer(pending.api_version, held.payload, pending.refused)
        else:
            payload = self._rewriter.rewrite(
                pending.api_key, pending.api_version, held.payload, pending.lists_all
            )
        self._counts.answers_rewritten += 1
        return FRAME_SIZE.pack(len(payload)) + payload

    def pause_writing(self) -> None:
        if self._client.transport is not None:
            self._client.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._client.transport is not None and not self._client.transport.is_closing():
            self._client.transport.resume_reading()

    def pause_reading(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._client.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class UnexpectedAnswer(Exception):
    """The broker answered out of order or unasked."""
