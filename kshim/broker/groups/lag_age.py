"""How long a group's oldest unread record has waited: its lag in seconds.

The lag in records (the high watermark minus the committed offset) says how much is left;
an operator of a replication pipeline also asks how old it is. A destination ten thousand
changes behind is in time if they arrived a second ago, and late if the oldest waited an
hour; the two diverge whenever the write rate moves. The age is read from the log itself,
when asked (a metrics scrape): the first timestamp of the stored batch holding the committed
offset, the first record the group has not processed. Nothing is tracked on the produce or
commit path, and a scrape reads one batch header per partition a group is behind on.

The timestamp is the batch's own: the producer's clock for CreateTime (Kafka's default,
``message.timestamp.type``), the broker's for LogAppendTime. A producer clock ahead of the
broker's reads as no wait at all, never as a negative one.
"""

from __future__ import annotations

import os

from kshim.protocol.record_batch import BATCH_OVERHEAD, InvalidBatch, read_header
from kshim.storage.interface import Chunk, FileRegion, OffsetOutOfRange, PartitionLog


async def unread_since_ms(log: PartitionLog, committed: int) -> int | None:
    """The first timestamp (epoch ms) of the batch holding ``committed``, or of the first
    one after it when retention removed it; None when nothing past ``committed`` is
    readable (caught up, or a log that moved meanwhile)."""
    if committed >= log.high_watermark:
        return None
    try:
        read = await log.read(max(committed, log.log_start_offset), BATCH_OVERHEAD)
    except (OffsetOutOfRange, OSError):  # a failing disk costs this figure, not the scrape
        return None
    try:
        if not read.chunks:
            return None
        timestamp = read_header(_header_bytes(read.chunks[0])).base_timestamp
    except (OSError, InvalidBatch):  # a segment cut short, or not a batch: no figure
        return None
    finally:
        for chunk in read.chunks:
            if isinstance(chunk, FileRegion):
                chunk.close()
    return timestamp if timestamp >= 0 else None  # -1: a batch with no timestamp


def _header_bytes(chunk: Chunk) -> bytes | memoryview:
    if isinstance(chunk, FileRegion):
        # One header from a segment, usually in the page cache: a pread as the fetch path's
        # sendfile is, on the loop.
        return os.pread(chunk.descriptor, BATCH_OVERHEAD, chunk.position)
    return memoryview(chunk)[:BATCH_OVERHEAD]
