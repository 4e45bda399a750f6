"""The metrics of one broker: what is observed as it happens (requests, group-commit
rounds), what is read at each scrape (the broker's state, its process tree), and the HTTP
endpoint serving them (``kshim.metrics.listen``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Gauge, Histogram

from kshim.broker.broker import Broker
from kshim.server.metrics.broker_collector import BrokerCollector
from kshim.server.metrics.endpoint import MetricsEndpoint
from kshim.server.metrics.errors import MetricsUnavailable
from kshim.server.metrics.process_tree import ProcessTreeCollector
from kshim.server.metrics.request_metrics import RequestMetrics
from kshim.server.request_budget import RequestBudget
from kshim.storage.log.log_store import DiskLogStore

log = logging.getLogger(__name__)

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
    ) -> None:
        """``listeners``: the broker's bound listeners by name, named by ``/healthz``."""
        self.registry = CollectorRegistry()
        if request_budget is not None:
            _budget_gauges(request_budget, self.registry)
        self.requests = RequestMetrics()
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

    def start(self, required: bool = False) -> bool:
        """Serves the endpoint at ``kshim.metrics.listen``; returns whether it does. Raises
        MetricsUnavailable when an address the operator set cannot be bound, or the default
        one when ``required`` (``kshim serve``: a readiness check would otherwise ask
        another broker's endpoint and take its answer for this one's); an embedded broker
        skips a default address in use with a warning."""
        config = self._broker.config
        address = config.metrics_address()
        if address is None:
            return False
        try:
            self.address = self.endpoint.start(*address)
        except OSError as error:
            if "kshim.metrics.listen" in config.explicit:
                raise MetricsUnavailable(*address, error) from error
            if required:
                hint = (
                    " (another broker's? set kshim.metrics.listen to another address, or to "
                    "nothing to serve no metrics)"
                )
                raise MetricsUnavailable(*address, error, hint) from error
            log.warning(
                "metrics not served: %s:%d: %s (set kshim.metrics.listen to serve "
                "them elsewhere, or to nothing)",
                *address,
                error.strerror,
            )
            return False
        self.endpoint.started = True
        log.info("metrics on http://%s:%d/metrics, readiness on /healthz", *self.address)
        return True

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
