"""The reading of every owned partition one upstream broker leads, over one connection in
one thread of its own: the number of threads is the number of leaders read from, however
many partitions are owned.

Each round asks the leader for the bounds (log start, last stable offset) of the partitions
whose view has not been started, then sends one read_committed Fetch of all the others
from their applied positions, and has each partition's whole batches applied. A partition
the broker no longer leads (NOT_LEADER_OR_FOLLOWER, ...) is handed back for a Metadata
lookup; a partition whose position retention passed (OFFSET_OUT_OF_RANGE) is rebuilt from
its new log start; a broken connection hands back all of them, and the loop ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from kshim.client.security import ClientSecurity
from kshim.client.wire import WireConnection
from kshim.gateway.full import upstream
from kshim.gateway.full.owned import OwnedPartition
from kshim.gateway.full.upstream import Address, FetchedPartition
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition

log = logging.getLogger(__name__)

# How long the leader holds a Fetch with nothing new: what a newly owned partition may wait
# before its first round, and what close() waits for the thread at most.
FETCH_MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.5
Result = TypeVar("Result")


class Host(Protocol):
    """What the loop needs of the index."""

    def led_by(self, node_id: int) -> list[OwnedPartition]:
        """The owned partitions this leader is read for."""

    def lost_leader(self, partitions: Sequence[OwnedPartition]) -> None:
        """Hands partitions back for a Metadata lookup."""

    def start(self, owned: OwnedPartition, log_start: int, target: int) -> Awaitable[None]:
        """Resets the view to ``log_start``; it is ready at ``target``."""

    def apply(self, owned: OwnedPartition, fetched: FetchedPartition) -> Awaitable[None]:
        """Applies the whole batches of a fetched answer."""


class LeaderLoop:
    """Reads the owned partitions node ``node_id`` leads, until it leads none of them."""

    def __init__(
        self, host: Host, node_id: int, address: Address, security: ClientSecurity | None
    ) -> None:
        self.node_id = node_id
        self.address = address
        self._host = host
        self._security = security
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"kshim-full-view-{node_id}")
        self._connection: WireConnection | None = None

    async def run(self) -> None:
        """Rounds until no owned partition is led by this node or the connection breaks;
        never raises but CancelledError. Closes the connection and the thread."""
        try:
            while partitions := self._host.led_by(self.node_id):
                try:
                    await self._round(partitions)
                except OSError as error:
                    log.warning(
                        "upstream broker %s at %s:%s: %s", self.node_id, *self.address, error
                    )
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    # Then at once ended: a lookup that names this node again starts a new loop.
                    self._host.lost_leader(partitions)
                    return
                except Exception:  # an error answer, a malformed one, a store failure
                    await self._in_thread(self._close)  # the next round connects afresh
                    log.exception(
                        "reading full-view sources from broker %s failed; retrying", self.node_id
                    )
                    await asyncio.sleep(RETRY_BACKOFF_S)
        finally:
            await self._in_thread(self._close)
            self._thread.shutdown(wait=False)

    async def _round(self, partitions: list[OwnedPartition]) -> None:
        new = [owned for owned in partitions if owned.target is None]
        if new:
            await self._start(new)
            return
        positions = {owned.source: owned.applied for owned in partitions}
        answers = await self._in_thread(self._fetch, positions)
        by_source = {owned.source: owned for owned in partitions}
        lost = []
        for source, fetched in answers.items():
            owned = by_source.get(source)
            if owned is None or owned.released:
                continue
            if fetched.error_code == ErrorCode.offset_out_of_range:
                log.warning("%s: retention passed the view's position; rebuilding it", source)
                owned.target = None
            elif fetched.error_code != ErrorCode.none:
                log.info(
                    "%s: %s from broker %s",
                    source,
                    ErrorCode(fetched.error_code).name,
                    self.node_id,
                )
                lost.append(owned)
            else:
                await self._host.apply(owned, fetched)
        self._host.lost_leader(lost)

    async def _start(self, new: list[OwnedPartition]) -> None:
        by_topic: dict[str, list[OwnedPartition]] = {}
        for owned in new:
            by_topic.setdefault(owned.source.topic, []).append(owned)
        for topic, owned_partitions in by_topic.items():
            indexes = [owned.source.partition for owned in owned_partitions]
            try:
                found = await self._in_thread(self._bounds, topic, indexes)
            except upstream.UpstreamError as error:
                log.info("%s: %s; looking its leaders up again", topic, error)
                self._host.lost_leader(owned_partitions)
                continue
            for owned in owned_partitions:
                if not owned.released:
                    await self._host.start(owned, *found[owned.source.partition])

    def _fetch(
        self, positions: dict[TopicPartition, int]
    ) -> dict[TopicPartition, FetchedPartition]:
        return upstream.fetch(self._connected(), positions, FETCH_MAX_WAIT_MS)

    def _bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return upstream.bounds(self._connected(), topic, partitions)

    def _connected(self) -> WireConnection:
        """The loop's thread only: its connection, made again after a failure."""
        if self._connection is None:
            self._connection = upstream.connect([self.address], self._security)
        return self._connection

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _in_thread(self, call: Callable[..., Result], *args: object) -> Result:
        return await asyncio.get_running_loop().run_in_executor(self._thread, call, *args)
