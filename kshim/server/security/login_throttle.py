"""Failed logins slow their source down: a token bucket per peer address.

Every failed SASL authentication takes a token from its address's bucket (``burst`` tokens,
refilled at ``rate`` a second). Once an address has failed, each new connection it makes to
a SASL listener takes a token when it is admitted, before its TLS handshake, and gives it
back if it authenticates: so while the address has no token, its new connections are
refused before a TLS handshake or a SASL step costs the broker anything, and a peer that
opens fifty connections at once gets no more tries than its tokens. Connections it already
has are untouched. A client that mistypes a password a few times is never affected; one
guessing passwords gets ``rate`` guesses a second, and the broker's event loop stays with
the clients it serves. Kafka bounds the same cost with connection-creation quotas (KIP-612)
and ``connection.failed.authentication.delay.ms``; this adds what a single peer can do.
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


@dataclass(slots=True)
class Login:
    """One admitted connection's way through authentication: whether it took a token of
    its address when admitted (the address had failed before); settled once."""

    address: str
    reserved: bool
    settled: bool = False


class LoginThrottle:
    def __init__(self, burst: int, rate: float) -> None:
        self._burst = float(burst)
        self._rate = rate
        self._buckets: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self._burst > 0

    def admit(self, address: str, now: float) -> Login | None:
        """A new connection from ``address`` that may try to authenticate, or None while
        the address has no token. Settle what is returned once the connection has
        authenticated, failed, or ended."""
        bucket = self._buckets.get(address) if self.enabled else None
        if bucket is None:
            return Login(address, reserved=False)
        if self._refilled(bucket, now) < 1:
            return None
        bucket.tokens -= 1
        return Login(address, reserved=True)

    def settle(self, login: Login, failed: bool, now: float) -> None:
        """``login`` failed, or authenticated (or ended without trying) when not
        ``failed``. Only its first settling counts."""
        if login.settled:
            return
        login.settled = True
        if login.reserved:
            bucket = self._buckets.get(login.address)
            if not failed and bucket is not None:  # the token taken at admission comes back
                bucket.tokens = min(self._burst, self._refilled(bucket, now) + 1)
        elif failed:
            self.failed(login.address, now)

    def wait_s(self, address: str, now: float) -> float:
        """Seconds until ``address`` has a token again (0 if it has one)."""
        bucket = self._buckets.get(address)
        if bucket is None:
            return 0.0
        return max(1 - self._refilled(bucket, now), 0.0) / self._rate

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
