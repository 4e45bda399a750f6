"""Workloads 5 and 6: memory under a backlog, and the cost of idle connections.

Accumulation (the LSMQ test): a fresh broker's time to answer after launch and its
idle RSS, then N 60-byte records produced with no consumer; RSS once the first tenth is in
and the broker is idle again, RSS and disk after them all, and the RSS growth per
backlogged record measured after that warm-up tenth (so one-off allocations of the first
produce, buffers and caches, are not counted per record). Optionally a longer backlog
follows, to separate bounded caches from per-record growth.

Idle connections: produce throughput without and with K open connections that
each made one ApiVersions request and then stay silent, alternating; the extra
RSS the K connections cost.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.brokers import RunningBroker
from benchmarks.workloads import create_topic, produce
from kshim.client.wire import WireConnection, connect
from kshim.protocol.apis import API_VERSIONS_KEY

SETTLE_S = 1.0
BACKLOG_RECORD_BYTES = 60
LINGER = {"linger.ms": 5}
IDLE_TIMEOUT_S = 10.0


def accumulation(broker: RunningBroker, records: int, extension: int = 0) -> dict[str, float]:
    """Runs on a broker that was just started (its ``ready_s`` is the launch time). With
    ``extension``, that many more records follow, and the RSS growth per record over them is
    reported too (the marginal cost once bounded caches such as kshim's memtable are full)."""
    time.sleep(SETTLE_S)
    idle_rss = broker.rss_bytes()
    topic = broker.topic("backlog")
    create_topic(broker, topic)
    warm_up = records // 10
    produce(broker, topic, warm_up, BACKLOG_RECORD_BYTES, **LINGER)
    time.sleep(SETTLE_S)
    warm_rss = broker.rss_bytes()
    produce(broker, topic, records - warm_up, BACKLOG_RECORD_BYTES, **LINGER)
    time.sleep(SETTLE_S)
    backlog_rss = broker.rss_bytes()
    metrics = {
        "ready_s": broker.ready_s,
        "idle_rss_mb": idle_rss / 1e6,
        # Once written to: what a first write starts (caches, threads, child processes).
        "idle_rss_after_produce_mb": warm_rss / 1e6,
        "backlog_rss_mb": backlog_rss / 1e6,
        "backlog_disk_mb": broker.disk_bytes() / 1e6,
        "rss_bytes_per_backlogged_record": (backlog_rss - warm_rss) / (records - warm_up),
    }
    if extension:
        produce(broker, topic, extension, BACKLOG_RECORD_BYTES, **LINGER)
        time.sleep(SETTLE_S)
        extended_rss = broker.rss_bytes()
        metrics["extended_backlog_rss_mb"] = extended_rss / 1e6
        metrics["rss_bytes_per_record_in_extension"] = (extended_rss - backlog_rss) / extension
    return metrics


def idle_connections(
    broker: RunningBroker, connections: int, records: int, rounds: int = 3
) -> dict[str, float]:
    """Alternates produce runs without and with the idle connections open, ``rounds``
    times, so drift in the machine's load hits both sides alike; medians of each side."""
    topic = broker.topic("idle")
    create_topic(broker, topic)
    produce(broker, topic, records // 4, 100, **LINGER)  # first-produce costs are not timed
    without: list[float] = []
    with_idle: list[float] = []
    extra_rss: list[int] = []
    for _ in range(rounds):
        without.append(produce(broker, topic, records, 100, **LINGER).records_per_second)
        time.sleep(SETTLE_S)
        rss_without = broker.rss_bytes()
        idle = open_idle_connections(broker, connections)
        try:
            time.sleep(SETTLE_S)
            extra_rss.append(broker.rss_bytes() - rss_without)
            with_idle.append(produce(broker, topic, records, 100, **LINGER).records_per_second)
        finally:
            for connection in idle:
                connection.close()
        time.sleep(SETTLE_S)  # the broker has dropped them before the next run without
    return {
        "records_per_s_without": statistics.median(without),
        "records_per_s_with": statistics.median(with_idle),
        "throughput_drop": 1 - statistics.median(with_idle) / statistics.median(without),
        "extra_rss_mb": extra_rss[0] / 1e6,  # later rounds reuse what the first allocated
    }


def open_idle_connections(broker: RunningBroker, count: int) -> list[WireConnection]:
    """Opens ``count`` connections that each get one ApiVersions answer, then go quiet."""
    opened: list[WireConnection] = []
    try:
        for _ in range(count):
            opened.append(connect(broker.bootstrap, IDLE_TIMEOUT_S))
            opened[-1].call(API_VERSIONS_KEY, 0)
    except BaseException:
        for connection in opened:
            connection.close()
        raise
    return opened
