"""The full-data views (``T.full``) of the source partitions this gateway owns, built from
the upstream Kafka cluster and kept in kshim's LMDB view store (docs/full-data-view.md).

For each owned ``T-p`` the index resets the view to the partition's log start, then reads
``T-p`` read_committed from the view's applied position on and applies each answer's whole
batches as the broker's applier applies a chunk (``view_changes``, then one store
transaction with the new applied position), so the view holds, per key, the latest
committed record at its original offset. Reads are served as the broker serves them
(``kshim.broker.full_view.reader``): widened one-record batches up to the high watermark,
which is the applied position.

A released partition's view stays in the store. Owned again (a rebalance that gives it back,
or a gateway restarted on the same ``--full-dir``), it is resumed from its applied position
instead of rebuilt, when that gives exactly what a rebuild would: the same topic (its id,
KIP-516, so not one deleted and created again under the name), the same log start as when
it was built (retention has removed nothing the view was built from), and an applied
position the partition's last stable offset has reached (Kafka's log below it never
changes: an unclean leader election, which can cut it, is off by default). Anything else
rebuilds it from the log start.

Threads: one per upstream broker read from (``leader.LeaderLoop``: one connection, one
Fetch of all its owned partitions at a time), one for LMDB writes (LMDB serialises writers
anyway, and it orders a takeover's look at a kept view after the applies before it), and
asyncio's default workers for Metadata lookups and LMDB reads. Every background task logs
what fails and retries; none ends with an exception nobody retrieves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from kshim.broker.full_view.changes import view_changes
from kshim.broker.full_view.reader import ViewRead, timestamp_hit, widened_batches
from kshim.broker.partition_reads import PartitionOffsets, TimestampHit
from kshim.client.security import ClientSecurity
from kshim.gateway.full import upstream
from kshim.gateway.full.chunk import whole_chunk
from kshim.gateway.full.leader import LeaderLoop
from kshim.gateway.full.owned import OwnedPartition
from kshim.gateway.full.upstream import Address, FetchedPartition
from kshim.storage.interface import TopicPartition
from kshim.storage.views.full_view_store import FullViewStore

log = logging.getLogger(__name__)

TOMBSTONE_PURGE_INTERVAL_S = 1.0  # as the broker's applier purges
LOOKUP_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)  # between failed Metadata lookups
Result = TypeVar("Result")


class PartitionNotOwned(LookupError):
    """The partition is not one this gateway owns (the relay answers NOT_LEADER_OR_FOLLOWER)."""


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ViewIndex:
    """The full-data views of the source partitions this gateway owns, built from the
    upstream cluster. Used from one event loop."""

    def __init__(
        self,
        directory: str,
        upstream_addresses: Sequence[Address],
        security: ClientSecurity | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self._store = FullViewStore(directory)
        self._addresses = list(upstream_addresses)
        self._security = security
        self._clock_ms = clock_ms
        self._owned: dict[TopicPartition, OwnedPartition] = {}
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._retention_ms: dict[str, int] = {}  # delete.retention.ms of each owned topic
        self._topic_ids: dict[str, bytes] = {}  # as the last Metadata lookup naming it said
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="kshim-full-view-store")
        self._lookup = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []

    async def own(self, topic: str, partition: int) -> None:
        """Starts building the view of ``topic``-``partition`` (``T``, not ``T.full``) from
        its upstream log start, in the background; nothing for a partition already owned."""
        source = TopicPartition(topic, partition)
        if source in self._owned:
            return
        self._owned[source] = OwnedPartition(source)
        if not self._background:
            self._background = [
                asyncio.create_task(self._look_up_leaders(), name="full-view-leaders"),
                asyncio.create_task(self._purge_tombstones(), name="full-view-tombstones"),
            ]
        self._lookup.set()

    async def release(self, topic: str, partition: int) -> None:
        """Stops following the partition; readers waiting on it return. Its view stays in
        the store, to be resumed if it is owned again (module docstring)."""
        owned = self._owned.pop(TopicPartition(topic, partition), None)
        if owned is None:
            return
        owned.released = True
        owned.wake()

    def owns(self, topic: str, partition: int) -> bool:
        return TopicPartition(topic, partition) in self._owned

    def ready(self, topic: str, partition: int) -> bool:
        """Whether the view reached the last stable offset its source had when owned:
        before that, a rebuilt view's high watermark could be seen going backwards, so
        readers are told to retry."""
        return self._owned_partition(topic, partition).ready()

    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        """The view's log start, high watermark and last stable offset (both the applied
        position); raises PartitionNotOwned."""
        return self._owned_partition(topic, partition).offsets()

    async def read(self, topic: str, partition: int, fetch_offset: int, max_bytes: int) -> ViewRead:
        """As the broker's ``read_view``: widened batches from ``fetch_offset`` up to the
        high watermark, out of range below 0 or past it; raises PartitionNotOwned."""
        owned = self._owned_partition(topic, partition)
        offsets = owned.offsets()
        if fetch_offset < 0 or fetch_offset > offsets.high_watermark:
            return ViewRead(offsets, (), out_of_range=True)
        batches = await asyncio.to_thread(
            widened_batches, self._store, owned.source, fetch_offset, max_bytes,
            offsets.high_watermark,
        )  # fmt: skip
        return ViewRead(offsets, batches)

    async def wait_beyond(self, topic: str, partition: int, offset: int, timeout_s: float) -> None:
        """Returns once the high watermark is past ``offset`` (a long-polling Fetch), the
        partition is released, or after ``timeout_s``; raises PartitionNotOwned."""
        await self._owned_partition(topic, partition).wait_beyond(offset, timeout_s)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int | None
    ) -> TimestampHit | None:
        """(offset, timestamp) of the first live record at or after ``timestamp``, or of the
        latest-stamped one when ``timestamp`` is None (ListOffsets MAX_TIMESTAMP); None when
        none. Scans the partition's live records: one per key."""
        owned = self._owned_partition(topic, partition)
        records = await asyncio.to_thread(self._store.live_records, owned.source)
        return timestamp_hit(records, owned.applied, timestamp)

    async def close(self) -> None:
        """Stops every task and thread, then closes the store; the views stay on disk."""
        tasks = self._background + list(self._loops.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(self._writer.shutdown)
        self._store.close()

    def _owned_partition(self, topic: str, partition: int) -> OwnedPartition:
        owned = self._owned.get(TopicPartition(topic, partition))
        if owned is None:
            raise PartitionNotOwned(f"{topic}-{partition} is not owned by this gateway")
        return owned

    # The leader loops' side (leader.Host).

    def led_by(self, node_id: int) -> list[OwnedPartition]:
        return [owned for owned in self._owned.values() if owned.leader == node_id]

    def lost_leader(self, partitions: Sequence[OwnedPartition]) -> None:
        for owned in partitions:
            owned.leader = None
        if partitions:
            self._lookup.set()

    async def start(self, owned: OwnedPartition, log_start: int, target: int) -> None:
        # In the writer thread, so after every apply still queued for the partition from
        # before it was released.
        topic_id = self._topic_ids.get(owned.source.topic)
        kept = await self._write(self._kept_position, owned.source, topic_id, log_start, target)
        if kept is None:
            await self._write(self._reset, owned.source, topic_id, log_start)
        if owned.released:
            return
        owned.started(log_start, target, kept)
        if kept is None:
            log.info("%s: view rebuilt from %s, ready at %s", owned.source, log_start, target)
        else:
            log.info("%s: view resumed at %s, ready at %s", owned.source, kept, target)

    def _kept_position(
        self, source: TopicPartition, topic_id: bytes | None, log_start: int, target: int
    ) -> int | None:
        """Writer thread: the applied position of the view kept in the store, if resuming
        it gives what a rebuild from ``log_start`` would (module docstring); else None."""
        if topic_id is None or self._store.source_id(source) != topic_id:
            return None
        if self._store.start_offset(source) != log_start:
            return None
        applied = max(self._store.applied_position(source), log_start)
        return applied if applied <= target else None

    def _reset(self, source: TopicPartition, topic_id: bytes | None, log_start: int) -> None:
        """Writer thread: an empty view from ``log_start``, noted as built from ``topic_id``
        (after the reset, so that a crash between leaves a view that is never resumed)."""
        self._store.reset_partition(source, log_start)
        self._store.apply(source, [], log_start)
        if topic_id is not None:
            self._store.note_source_id(source, topic_id)

    async def apply(self, owned: OwnedPartition, fetched: FetchedPartition) -> None:
        if owned.released:
            return
        expiry = self._clock_ms() + self._retention_ms.get(
            owned.source.topic, upstream.DEFAULT_DELETE_RETENTION_MS
        )
        next_offset = await self._write(self._apply_chunk, owned.source, fetched, expiry)
        if next_offset is not None and not owned.released:
            owned.advance(next_offset)

    def _apply_chunk(
        self, source: TopicPartition, fetched: FetchedPartition, tombstone_expiry_ms: int
    ) -> int | None:
        """Writer thread: applies the answer's whole batches; the offset after them."""
        chunk = whole_chunk(fetched.records, fetched.aborted)
        if chunk is None:
            return None
        changes = view_changes(chunk.batches, chunk.aborted, tombstone_expiry_ms)
        self._store.apply(source, changes, chunk.next_offset)
        return chunk.next_offset

    async def _write(self, call: Callable[..., Result], *args: object) -> Result:
        return await asyncio.get_running_loop().run_in_executor(self._writer, call, *args)

    # Background tasks.

    async def _look_up_leaders(self) -> None:
        """Names a leader for every owned partition without one, and starts its loop."""
        failures = 0
        while True:
            await self._lookup.wait()
            self._lookup.clear()
            try:
                unled = await self._assign_leaders()
            except Exception as error:  # the cluster unreachable, or answering errors
                log.warning("looking up the leaders of full-view sources failed: %s", error)
                unled = True
            if unled:
                failures += 1
                await asyncio.sleep(LOOKUP_BACKOFF_S[min(failures, len(LOOKUP_BACKOFF_S)) - 1])
                self._lookup.set()
            else:
                failures = 0

    async def _assign_leaders(self) -> bool:
        """One Metadata lookup; True when some partition is still without a leader."""
        unled = [owned for owned in self._owned.values() if owned.leader is None]
        if not unled:
            return False
        topics = sorted({owned.source.topic for owned in unled})
        found = await asyncio.to_thread(
            upstream.describe_leaders, self._addresses, self._security, topics
        )
        for topic in topics:
            if topic in found.topic_ids:
                self._topic_ids[topic] = found.topic_ids[topic]
            else:
                self._topic_ids.pop(topic, None)
            if topic not in self._retention_ms:
                self._retention_ms[topic] = await self._delete_retention_ms(topic)
        for owned in unled:
            node_id = found.leaders.get(owned.source, upstream.NO_LEADER)
            if node_id in found.brokers and not owned.released:
                owned.leader = node_id
                self._follow(node_id, found.brokers[node_id])
        return any(owned.leader is None for owned in self._owned.values())

    async def _delete_retention_ms(self, topic: str) -> int:
        """How long the view keeps the topic's tombstones (read once, when first owned);
        Kafka's default when DescribeConfigs fails (a principal without DESCRIBE_CONFIGS)."""
        try:
            return await asyncio.to_thread(
                upstream.delete_retention_ms, self._addresses, self._security, topic
            )
        except Exception as error:
            log.warning(
                "%s: delete.retention.ms not read (%s); tombstones kept %s ms",
                topic, error, upstream.DEFAULT_DELETE_RETENTION_MS,
            )  # fmt: skip
            return upstream.DEFAULT_DELETE_RETENTION_MS

    def _follow(self, node_id: int, address: Address) -> None:
        if node_id in self._loops and not self._loops[node_id].done():
            return
        loop = LeaderLoop(self, node_id, address, self._security)
        task = asyncio.create_task(loop.run(), name=f"full-view-broker-{node_id}")
        self._loops[node_id] = task
        task.add_done_callback(lambda done: self._ended(node_id, done))

    def _ended(self, node_id: int, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # never: run() catches
            log.error("full-view loop of broker %s failed", node_id, exc_info=task.exception())
        if self._loops.get(node_id) is task:
            del self._loops[node_id]
            # Partitions assigned to it while it was closing its connection.
            self.lost_leader(self.led_by(node_id))

    async def _purge_tombstones(self) -> None:
        """Drops expired tombstones every second, as the broker's applier does."""
        while True:
            await asyncio.sleep(TOMBSTONE_PURGE_INTERVAL_S)
            try:
                await self._write(self._store.purge_tombstones, self._clock_ms())
            except Exception:
                log.exception("purging full-view tombstones failed; retrying")
