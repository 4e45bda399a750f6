"""Requests as they are answered: a count by API, version and error code, and a latency
histogram per API (from the request's decoding to its response being ready, what Kafka's
RequestQueueTime plus LocalTime plus RemoteTime cover on one node).

The error code is the response's top-level one; Produce and Fetch answer per partition and
count as ``none`` here (their partitions' errors are what the clients report).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from kshim.broker.registry import ROUTES
from kshim.protocol.errors import ErrorCode

# Seconds: from a sub-millisecond Metadata to a long-polling Fetch (fetch.max.wait.ms is
# 500 by default, and clients may ask for more).
LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._requests = Counter(
            "kshim_requests",
            "Requests answered, by API, API version and top-level error code",
            ["api", "version", "error"],
            registry=registry,
        )
        self._latency = Histogram(
            "kshim_request_duration_seconds",
            "Time from a request's decoding to its response being ready, by API",
            ["api"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        # The labelled children, found once: labels() takes a lock and builds a key.
        self._counted: dict[tuple[int, int, int], Any] = {}
        self._timed: dict[int, Any] = {}

    def observe(self, api_key: int, version: int, error_code: int, seconds: float) -> None:
        """One request answered (or, with acks=0, handled) in ``seconds``."""
        counter = self._counted.get((api_key, version, error_code))
        if counter is None:
            counter = self._requests.labels(api_name(api_key), str(version), _error(error_code))
            self._counted[(api_key, version, error_code)] = counter
        counter.inc()
        histogram = self._timed.get(api_key)
        if histogram is None:
            histogram = self._timed[api_key] = self._latency.labels(api_name(api_key))
        histogram.observe(seconds)


def api_name(api_key: int) -> str:
    """Kafka's name of the API (``Produce``), or its key for one kshim does not route."""
    route = ROUTES.get(api_key)
    if route is None:
        return str(api_key)
    return route.request_type.__name__.removesuffix("Request")


def _error(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
