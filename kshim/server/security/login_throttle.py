"""Failed logins slow their source down: a token bucket per peer address.

Every failed SASL authentication takes a token from its address's bucket (``burst`` tokens,
refilled at ``rate`` a second). While an address has none left, its new connections to a
SASL listener are closed as soon as they are accepted, before a TLS handshake or a SASL
step costs the broker anything; connections it already has are untouched. A client that
mistypes a password a few times is never affected; one guessing passwords gets ``rate``
guesses a second, and the broker's event loop stays with the clients it serves. Kafka
bounds the same cost with connection-creation quotas (KIP-612) and
``connection.failed.authentication.delay.ms``; this adds what a single peer can do.
"""

from __future__ import annotations

from dataclasses import dataclass

# Addresses remembered at most: a flood from many addresses cannot grow the table without
# bound (a full bucket is forgotten first: it says nothing a new one would not).
MAX_ADDRESSES = 100_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float  # seconds, monotonic


class LoginThrottle:
    def __init__(self, burst: int, rate: float) -> None:
        self._burst = float(burst)
        self._rate = rate
        self._buckets: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self._burst > 0

    def admits(self, address: str, now: float) -> bool:
        """Whether a new connection from ``address`` may try to authenticate."""
        bucket = self._buckets.get(address)
        return bucket is None or self._refilled(bucket, now) >= 1

    def failed(self, address: str, now: float) -> None:
        """A login from ``address`` failed."""
        if not self.enabled:
            return
        bucket = self._buckets.get(address)
        if bucket is None:
            if len(self._buckets) >= MAX_ADDRESSES:
                self._forget_full(now)
            bucket = self._buckets[address] = _Bucket(self._burst, now)
        bucket.tokens = max(self._refilled(bucket, now) - 1, 0.0)

    def _refilled(self, bucket: _Bucket, now: float) -> float:
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        return bucket.tokens

    def _forget_full(self, now: float) -> None:
        full = [a for a, b in self._buckets.items() if self._refilled(b, now) >= self._burst]
        for address in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[address]
