"""The broker's state as metric families (kshim/server/metrics/broker_collector.py), read
on the event loop as a scrape does, over a real Broker with a fake clock: a full-data
view's lag in records and in seconds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client.metrics_core import Metric

from kshim.broker.broker import Broker
from kshim.broker.full_view.applier import catch_up
from kshim.server.metrics.broker_collector import BrokerCollector
from kshim.testing import FakeClock
from tests.full_view.support import SOURCE, TOPIC, append, open_broker


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
