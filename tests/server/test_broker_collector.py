"""The broker's state as metric families (kshim/server/metrics/broker_collector.py), read
on the event loop as a scrape does, over a real Broker with a fake clock: a full-data
view's lag in records and in seconds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client.metrics_core import Metric

from kshim.api.records import fetch
from kshim.broker.broker import Broker
from kshim.broker.full_view.applier import catch_up
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kshim.server.metrics.broker_collector import BrokerCollector
from kshim.testing import FakeClock
from tests.broker.handler_calls import context
from tests.full_view.support import SOURCE, TOPIC, append, open_broker

FETCH = 1


async def families(broker: Broker) -> dict[str, Metric]:
    collector = BrokerCollector(broker, asyncio.get_running_loop(), dict)
    return {family.name: family for family in await collector._families()}


def value(family: Metric, **labels: str) -> float:
    [sample] = [s for s in family.samples if all(s.labels[k] == v for k, v in labels.items())]
    return sample.value


async def test_a_view_lag_in_records_and_in_seconds_behind(tmp_path: Path) -> None:
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock)  # views kept from the start, nothing applied
    await broker.topics.create(TOPIC, 1, {})
    labels = {"topic": TOPIC, "partition": "0"}
    first = await families(broker)
    assert value(first["kshim_full_view_lag_records"], **labels) == 0
    for index in range(3):
        await append(broker, [(b"k%d" % index, b"v")])
    clock.advance(5000)
    behind = await families(broker)
    assert value(behind["kshim_full_view_lag_records"], **labels) == 3
    assert value(behind["kshim_full_view_lag_seconds"], **labels) == 5.0  # since caught up
    await catch_up(broker, SOURCE)
    clock.advance(1000)
    caught_up = await families(broker)
    assert value(caught_up["kshim_full_view_lag_records"], **labels) == 0
    assert value(caught_up["kshim_full_view_lag_seconds"], **labels) == 0
    await broker.close()


async def fetch_from(broker: Broker, offset: int, max_wait_ms: int = 0) -> None:
    wanted = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    request = FetchRequest(
        max_wait_ms=max_wait_ms, topics=[FetchTopic(topic=TOPIC, partitions=[wanted])]
    )
    await fetch.handle(request, context(broker, FETCH, 12))


async def test_fetched_records_and_bytes_count_what_was_answered(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"1"), (b"b", b"2")])
    await append(broker, [(b"c", b"3")])
    await fetch_from(broker, 0)  # 3 records in 2 batches
    await fetch_from(broker, 1)  # the first batch again (whole), but one offset on: 2
    await fetch_from(broker, 3)  # nothing new: nothing counted
    labels = {"topic": TOPIC}
    counted = await families(broker)
    assert value(counted["kshim_fetched_records"], **labels) == 5
    log = broker.topics.log(SOURCE)
    assert log is not None
    assert value(counted["kshim_fetched_bytes"], **labels) == 2 * sum(
        segment.size
        for segment in log.segments  # type: ignore[attr-defined]
    )
    await broker.close()
