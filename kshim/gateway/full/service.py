"""``T.full`` served by the gateways in front of a Kafka cluster: who owns each partition
(ownership.py), the index of the partitions this gateway owns (index.py), and the requests
the relay hands over (requests.py routes them, answers.py answers reads, metadata.py names
the owners as leaders). docs/gateway.md has the design."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable

from kshim.broker.full_view.naming import source_name
from kshim.gateway.full import answers, requests
from kshim.gateway.full.index import ViewIndex
from kshim.gateway.full.metadata import views_in_metadata
from kshim.gateway.full.ownership import ViewOwnership
from kshim.gateway.full.requests import Decoded, Routing

OWNERS_WAIT_S = 10.0  # a new view's first Metadata answer waits this long for its owners
POLL_S = 0.05


class GatewayViews:
    """What the relay asks of the views (kshim/gateway/local_steps.py's ``Served``)."""

    closing = False  # no answer of a view ends its connection

    def __init__(
        self, index: ViewIndex, ownership: ViewOwnership, scratch: str | None = None
    ) -> None:
        """``scratch``: the index's directory, removed at ``stop`` (a temporary one: the
        index is rebuilt from the cluster whenever a partition is taken over)."""
        self.index = index
        self.ownership = ownership
        self._scratch = scratch
        self._placed: set[str] = set()  # views whose placeholder topic is known to exist

    def route(self, head: bytes | memoryview, size: int) -> Routing:
        return requests.route(head, size)

    async def answer(self, request: Decoded) -> bytes:
        api_key, version, correlation_id, body = request
        return await answers.answer(api_key, version, correlation_id, body, self.index)

    async def prepare(self, request: Decoded) -> None:
        """Makes the placeholder topic of each view a Metadata request names, once, and
        waits (a few seconds at most) until the group has given its partitions owners: the
        answer then names them, as a broker's first answer for a topic it has names its
        leaders."""
        for name in requests.topic_names(request):
            source = source_name(name)
            if (
                source is not None
                and name not in self._placed
                and await self.ownership.ensure_view_topic(source)
            ):
                self._placed.add(name)
                await self._owners_known(name)

    async def _owners_known(self, name: str) -> None:
        count = self.ownership.partition_counts.get(name, 0)
        deadline = time.monotonic() + OWNERS_WAIT_S
        while time.monotonic() < deadline:
            if all(self.ownership.owner(name, p) is not None for p in range(count)):
                return
            await asyncio.sleep(POLL_S)

    def owner_of(self, view_topic: str, partition: int) -> tuple[int, str, int] | None:
        owner = self.ownership.owner(view_topic, partition)
        return None if owner is None else (owner.node_id, owner.host, owner.port)

    def metadata_rewrite(self) -> Callable[[object, bool], object]:
        return views_in_metadata(self.owner_of, self._every_owner)

    def _every_owner(self) -> set[tuple[int, str, int]]:
        owners = self.ownership.owners().values()
        return {(owner.node_id, owner.host, owner.port) for owner in owners}

    async def start(self) -> None:
        await self.ownership.start()

    async def stop(self) -> None:
        await self.ownership.stop()
        await self.index.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
