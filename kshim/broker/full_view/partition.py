"""A partition of ``T.full`` as Fetch and ListOffsets see it (``broker/partition_reads.py``).

Any read keeps the view from then on: the first one waits while it is built (view.py).
The view holds committed data only, so both isolation levels read the same
batches, up to its high watermark (its last stable offset too), and no
aborted transactions are ever listed.
"""

from __future__ import annotations

from kshim.broker.full_view import reader
from kshim.broker.full_view.view import FullView
from kshim.broker.partition_reads import PartitionOffsets, PartitionRead, TimestampHit
from kshim.storage.interface import TopicPartition


class ViewPartition:
    """Partition ``source.partition`` of the view of ``source.topic``."""

    def __init__(self, view: FullView, view_partition: TopicPartition, source: TopicPartition):
        self.topic_partition = view_partition
        self._view = view
        self._source = source

    async def offsets(self) -> PartitionOffsets:
        await self._view.ensure_kept(self._source.topic)
        return await reader.view_offsets(self._view, self._source)

    async def read(self, fetch_offset: int, max_bytes: int, read_committed: bool) -> PartitionRead:
        await self._view.ensure_kept(self._source.topic)
        result = await reader.read_view(self._view, self._source, fetch_offset, max_bytes)
        return PartitionRead(result.offsets, result.batches, out_of_range=result.out_of_range)

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        await self._view.ensure_kept(self._source.topic)
        return await reader.offset_for_timestamp(self._view, self._source, timestamp)

    async def offset_of_max_timestamp(self) -> TimestampHit | None:
        await self._view.ensure_kept(self._source.topic)
        return await reader.offset_for_timestamp(self._view, self._source, None)
