"""What a gateway's delayed delivery has done, for its metrics (kshim/gateway/metrics.py).

Counted in the broker's lateness buckets (kshim/storage/schedule/delay_records.py), so a
gateway's ``kshim_delayed_lateness_seconds`` reads as the broker's does. Lateness is taken
when the delivery transaction has committed, the moment a read_committed consumer of ``T``
can first see the record (the broker takes it at the append, which is that moment there).
The delivery transactions' own durations are counted beside it: a record can never be less
late than the transaction that carries it, so the two histograms side by side tell waiting
from Kafka's commit time. In memory, from the gateway's start; plain integers written by the
event loop's thread, read by a scrape.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from kshim.storage.schedule.delay_records import LATENESS_BOUNDS_MS


@dataclass(slots=True)
class Buckets:
    """Counts per LATENESS_BOUNDS_MS bucket (a value at most the bound), the last one for
    anything later than every bound, and the sum of the values in seconds."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENESS_BOUNDS_MS) + 1))
    sum_s: float = 0.0

    def add(self, milliseconds: int) -> None:
        self.counts[bisect.bisect_left(LATENESS_BOUNDS_MS, milliseconds)] += 1
        self.sum_s += milliseconds / 1000


@dataclass(slots=True)
class DeliveryFigures:
    lateness: dict[str, Buckets] = field(default_factory=dict)  # by target topic
    transactions: Buckets = field(default_factory=Buckets)

    def delivered(self, topic: str, lateness_ms: list[int], transaction_ms: int) -> None:
        """One delivery transaction committed: its records' lateness and its duration."""
        buckets = self.lateness.setdefault(topic, Buckets())
        for late in lateness_ms:
            buckets.add(max(0, late))
        self.transactions.add(max(0, transaction_ms))
