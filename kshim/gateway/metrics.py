"""A gateway's ``/metrics`` and ``/healthz``, served as the broker's are (the server's
MetricsEndpoint: a thread of its own, prometheus_client's text format).

A scrape reads plain counters the event loop keeps (relay.py's RelayCounts, the reviewer's
outcomes, the alarms, delayed delivery's figures): reading an integer needs no hand-off to
the loop. Names follow the broker's: a ``kshim_gateway_`` prefix, ``_total`` on counters,
and the broker's alarm and delayed-delivery families, so the same alert rules and dashboard
panels watch both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kshim.gateway.delay.dispatcher import DelayDispatcher
from kshim.gateway.gateway import Gateway
from kshim.server.metrics.broker_collector import lateness_buckets
from kshim.server.metrics.endpoint import MetricsEndpoint


class GatewayCollector(Collector):
    def __init__(self, gateway: Gateway, delays: DelayDispatcher | None = None) -> None:
        self._gateway = gateway
        self._delays = delays

    def collect(self) -> Iterator[Metric]:
        gateway, counts = self._gateway, self._gateway.counts
        yield _gauge(
            "kshim_gateway_connections", "Client connections open", gateway.open_connections
        )
        yield _counter(
            "kshim_gateway_connections_accepted", "Client connections accepted", counts.connections
        )
        yield _counter("kshim_gateway_requests", "Requests relayed upstream", counts.requests)
        yield _counter(
            "kshim_gateway_answers_rewritten",
            "Answers naming brokers (or bounding versions) rewritten",
            counts.answers_rewritten,
        )
        yield _counter(
            "kshim_gateway_upstream_failures",
            "Client connections closed because their broker could not be reached",
            counts.upstream_failures,
        )
        yield _gauge(
            "kshim_gateway_upstream_brokers",
            "Upstream brokers known",
            len(gateway.topology.brokers),
        )
        yield from self._reviews()
        if self._delays is not None:
            yield from delay_families(self._delays)

    def _reviews(self) -> Iterator[Metric]:
        reviewer = self._gateway.reviewer
        if reviewer is None:
            return
        reviews = CounterMetricFamily(
            "kshim_transaction_reviews",
            "Reviews of overdue transactions by outcome",
            labels=["outcome"],
        )
        for outcome in ("commit", "abort", "unknown"):
            reviews.add_metric([outcome], reviewer.outcomes[outcome])
        yield reviews
        active = GaugeMetricFamily(
            "kshim_alarms_active",
            "Alarms raised and not cleared: 1 each",
            labels=["kind", "subject"],
        )
        for kind, subject in reviewer.alarms.active:
            active.add_metric([kind, subject], 1)
        yield active


def delay_families(delays: DelayDispatcher) -> Iterator[Metric]:
    """The broker's delayed-delivery families, for the partitions this gateway delivers,
    and how long its delivery transactions took (figures.py)."""
    pending = GaugeMetricFamily(
        "kshim_delayed_pending",
        "Delayed records waiting for their due time, by topic (partitions this gateway owns)",
        labels=["topic"],
    )
    counts: dict[str, int] = {}
    for owned in list(delays.owned.values()):  # one C-level copy: the loop may change it
        counts[owned.target] = counts.get(owned.target, 0) + len(owned.schedule)
    for topic, count in sorted(counts.items()):
        pending.add_metric([topic], count)
    yield pending
    lateness = HistogramMetricFamily(
        "kshim_delayed_lateness_seconds",
        "How late delayed records were committed to their topic after their due time",
        labels=["topic"],
    )
    for topic, buckets in sorted(dict(delays.figures.lateness).items()):
        lateness.add_metric([topic], lateness_buckets(buckets.counts), sum_value=buckets.sum_s)
    yield lateness
    transactions = delays.figures.transactions
    yield HistogramMetricFamily(
        "kshim_gateway_delay_transaction_seconds",
        "Duration of the upstream transactions that deliver due records",
        buckets=lateness_buckets(transactions.counts),
        sum_value=transactions.sum_s,
    )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def serve_metrics(
    gateway: Gateway, host: str, port: int, delays: DelayDispatcher | None = None
) -> tuple[MetricsEndpoint, tuple[str, int]]:
    """Serves the gateway's metrics on ``host:port`` (0: any free port) until the endpoint
    is stopped; returns it and its bound address. Raises OSError."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(GatewayCollector(gateway, delays))
    upstream = gateway.describe_upstream()
    endpoint = MetricsEndpoint(
        registry, asyncio.get_running_loop(), lambda: ["role=gateway", f"upstream={upstream}"]
    )
    bound = endpoint.start(host, port)
    endpoint.started = True
    return endpoint, bound
