"""The metrics of one broker: what is observed as it happens (requests, group-commit
rounds), what is read at each scrape (the broker's state, its process tree), and the HTTP
endpoint serving them (``kshim.metrics.listen``)."""

from __future__ import annotations

import asyncio
import functools
import os
import socket
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Gauge, Histogram

from kshim.broker.broker import Broker
from kshim.server.metrics.broker_collector import BrokerCollector
from kshim.server.metrics.endpoint import MetricsEndpoint
from kshim.server.metrics.process_tree import ProcessTreeCollector
from kshim.server.metrics.request_metrics import RequestMetrics
from kshim.server.request_budget import RequestBudget
from kshim.storage.log.log_store import DiskLogStore

# A group-commit round writes the write-ahead log (or one partition's segment file) and
# fsyncs it: about a millisecond on an SSD, tens on a disk or a loaded VM.
FLUSH_BUCKETS_S = (
    0.0001,
    0.00025,
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
)
FLUSH_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


class BrokerMetrics:
    def __init__(
        self,
        broker: Broker,
        connections: Callable[[], dict[str, int]],
        request_budget: RequestBudget | None = None,
        listeners: Mapping[str, tuple[str, int]] | None = None,
        requests: RequestMetrics | None = None,
    ) -> None:
        """``listeners``: the broker's bound listeners by name, named by ``/healthz``;
        ``requests``: the requests counted so far (a new count by default). Call on the
        event loop's thread."""
        self.registry = CollectorRegistry()
        if request_budget is not None:
            _budget_gauges(request_budget, self.registry)
        self.requests = RequestMetrics() if requests is None else requests
        loop = asyncio.get_running_loop()
        self.registry.register(BrokerCollector(broker, loop, connections, self.requests.families))
        self.registry.register(ProcessTreeCollector(broker.config.data_dir))
        self._flush_seconds = Histogram(
            "kshim_log_flush_duration_seconds",
            "Time to write one group-commit round and fsync it",
            buckets=FLUSH_BUCKETS_S,
            registry=self.registry,
        )
        self._flush_batches = Histogram(
            "kshim_log_flush_batches",
            "Record batches one group-commit round made durable",
            buckets=FLUSH_BATCH_BUCKETS,
            registry=self.registry,
        )
        if isinstance(broker.logs, DiskLogStore):
            broker.logs.observe_rounds(self._flushed)
        self.endpoint = MetricsEndpoint(
            self.registry, loop, functools.partial(broker_identity, broker, listeners or {})
        )
        self.address: tuple[str, int] | None = None
        self._broker = broker

    def _flushed(self, seconds: float, batches: int) -> None:
        self._flush_seconds.observe(seconds)
        self._flush_batches.observe(batches)

    def serve(self, listening: socket.socket) -> None:
        """Serves the endpoint on ``listening``, bound at start (on_demand.py)."""
        host, port = listening.getsockname()[:2]
        self.address = (str(host), int(port))
        self.endpoint.serve(listening)
        self.endpoint.started = True

    def stop(self) -> None:
        self.endpoint.started = False
        self.endpoint.stop()
        if isinstance(self._broker.logs, DiskLogStore):
            self._broker.logs.unobserve_rounds(self._flushed)


def _budget_gauges(budget: RequestBudget, registry: CollectorRegistry) -> None:
    """queued.max.request.bytes in use and waited for, read at each scrape (as Kafka's
    MemoryPoolUsed, and its channels muted for memory). A scrape reads two ints the event
    loop writes: never torn in CPython."""
    used = Gauge(
        "kshim_request_memory_used_bytes",
        "Bytes of requests over 16 KiB read or being read and not yet handled "
        "(bounded by queued.max.request.bytes)",
        registry=registry,
    )
    used.set_function(lambda: budget.in_use)
    waiting = Gauge(
        "kshim_request_memory_waiting_connections",
        "Connections waiting for queued.max.request.bytes before reading a request's body",
        registry=registry,
    )
    waiting.set_function(lambda: budget.waiting)


def broker_identity(broker: Broker, listeners: Mapping[str, tuple[str, int]]) -> list[str]:
    """What ``/healthz`` says of the broker after ``ready``: ``key=value`` lines naming it
    (node id, process id, data directory, bound listeners), so that a readiness check can
    tell it is asking the broker it means (kshim.healthcheck)."""
    bound = ",".join(f"{name}://{host}:{port}" for name, (host, port) in listeners.items())
    return [
        f"node.id={broker.config.get_int('node.id')}",
        f"pid={os.getpid()}",
        f"data.dir={os.path.abspath(broker.config.data_dir)}",
        f"listeners={bound}",
    ]
