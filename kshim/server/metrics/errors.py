"""The metrics' error a caller handles without importing what serves them (prometheus_client
costs about 70 ms and 4.6 MB to import, which a broker without metrics does not pay)."""

from __future__ import annotations


class MetricsUnavailable(Exception):
    """The metrics address cannot be bound; ``cause`` says why."""

    def __init__(self, host: str, port: int, cause: OSError, hint: str = "") -> None:
        super().__init__(f"cannot serve metrics on {host}:{port}")
        self.cause = cause
        self.hint = hint  # what to do about it, when the operator did not choose the address
