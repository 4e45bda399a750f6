"""Requests as they are answered: a count by API, version and error code, and a latency
histogram per API (from the request's decoding to its response being ready, what Kafka's
RequestQueueTime plus LocalTime plus RemoteTime cover on one node).

The error code is the response's top-level one; Produce and Fetch answer per partition and
count as ``none`` here (their partitions' errors are what the clients report).
"""

from __future__ import annotations

import bisect
import itertools
from typing import TYPE_CHECKING

from kshim.api.routes import ROUTES
from kshim.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

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
    """Counted in plain integers on the event loop (a fifth of what prometheus_client's
    labelled metrics cost a request: 0.4 against 1.9 µs), turned into metric families at
    a scrape, also on the event loop (broker_collector.py)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, int, int], int] = {}
        # Per API: a count per latency bucket (the last: above every bound), then the sum.
        self._latencies: dict[int, list[float]] = {}

    def observe(self, api_key: int, version: int, error_code: int, seconds: float) -> None:
        """One request answered (or, with acks=0, handled) in ``seconds``."""
        key = (api_key, version, error_code)
        self._counts[key] = self._counts.get(key, 0) + 1
        latencies = self._latencies.get(api_key)
        if latencies is None:
            latencies = self._latencies[api_key] = [0.0] * (len(LATENCY_BUCKETS_S) + 2)
        latencies[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1  # le: at most
        latencies[-1] += seconds

    def families(self) -> list[Metric]:
        # Imported at the first scrape: requests are counted from the broker's start, but
        # prometheus_client is loaded only once someone asks for metrics (on_demand.py).
        from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily

        requests = CounterMetricFamily(
            "kshim_requests",
            "Requests answered, by API, API version and top-level error code",
            labels=["api", "version", "error"],
        )
        for (api_key, version, error_code), count in self._counts.items():
            requests.add_metric([api_name(api_key), str(version), _error(error_code)], count)
        latency = HistogramMetricFamily(
            "kshim_request_duration_seconds",
            "Time from a request's decoding to its response being ready, by API",
            labels=["api"],
        )
        for api_key, counts in self._latencies.items():
            cumulative = list(itertools.accumulate(counts[:-1]))
            buckets = [
                (repr(bound), total)
                for bound, total in zip(LATENCY_BUCKETS_S, cumulative, strict=False)
            ]
            latency.add_metric(
                [api_name(api_key)], [*buckets, ("+Inf", cumulative[-1])], counts[-1]
            )
        return [requests, latency]


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
