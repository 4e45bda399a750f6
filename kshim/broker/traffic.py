"""What clients moved through each topic since the broker started: records and bytes
produced, bytes and offsets fetched. Plain integers that Produce and Fetch add to on the event loop,
read by the metrics (kshim/server/metrics/); a few dictionary additions per request."""

from __future__ import annotations

import collections


class TopicTraffic:
    def __init__(self) -> None:
        self.produced_records: collections.Counter[str] = collections.Counter()
        self.produced_bytes: collections.Counter[str] = collections.Counter()
        self.fetched_bytes: collections.Counter[str] = collections.Counter()
        # Offsets Fetch moved consumers on: records, a transaction's marker counting as one
        # (records are not decoded to be sent); a view's reads are not counted.
        self.fetched_offsets: collections.Counter[str] = collections.Counter()

    def produced(self, topic: str, records: int, size: int) -> None:
        """A batch of ``records`` records, ``size`` bytes, appended to ``topic``."""
        self.produced_records[topic] += records
        self.produced_bytes[topic] += size

    def fetched(self, topic: str, size: int, offsets: int) -> None:
        if size:
            self.fetched_bytes[topic] += size
        if offsets:
            self.fetched_offsets[topic] += offsets
