"""One gateway given both ``--full`` and ``--delay`` in front of Apache Kafka: a record
produced to ``T.delay`` stays out of ``T.full`` until it is due, then the view holds it as
the latest record of its key, as on kshim's broker (a delivered record is appended to ``T``
like any other, docs/delayed-delivery.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.testing import GatewayProcess, KafkaProcess
from tests.gateway.delay_clients import (
    TAKEN_OVER,
    ToProduce,
    create_topics,
    due_at,
    now_ms,
    produce,
    read_arrivals,
    unique,
    wait_for_log,
)
from tests.gateway.full_records import (
    View,
    committed_records,
    exactly_once_each,
    last_of_each_key,
    read_view,
)

pytestmark = pytest.mark.timeout(180)
SERVING = "serving full-data views"
DUE_IN_MS = 6000
LINGER_S = 0.5


@pytest.fixture
def topic(kafka_upstream: KafkaProcess) -> str:
    name = unique("full-delay")
    asyncio.run(create_topics(kafka_upstream.bootstrap, [name], 1))
    return name


@pytest.fixture
def both(kafka_upstream: KafkaProcess, topic: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    options = ["--full", "--full-group", unique("full-delay-views")]
    options += ["--delay", "--delay-group", unique("full-delay-dispatch")]
    options += ["--delay-topics", f"{topic}.delay", "--delay-session-timeout-ms", "1000"]
    gateway = GatewayProcess(tmp_path, kafka_upstream.bootstrap, options=options).start()
    try:
        wait_for_log(gateway, SERVING)
        wait_for_log(gateway, TAKEN_OVER)
        yield gateway
    finally:
        gateway.stop()


async def test_a_delayed_record_enters_the_view_when_it_is_due(
    kafka_upstream: KafkaProcess, topic: str, both: GatewayProcess
) -> None:
    read_view(both.bootstrap, topic, {}, seconds=20)  # named: the view is there, and empty
    (first,) = await produce(both.bootstrap, topic, [ToProduce(b"k1", b"now", ())])
    due = now_ms() + DUE_IN_MS
    later = [
        ToProduce(b"k1", b"later", (due_at(due),)),
        ToProduce(b"k2", b"later too", (due_at(due),)),
    ]
    await produce(both.bootstrap, f"{topic}.delay", later)
    before: View = {(0, b"k1"): (first, b"now")}
    assert exactly_once_each(read_view(both.bootstrap, topic, dict(before))) == before
    assert now_ms() < due, "the view was read after the records fell due: lengthen DUE_IN_MS"

    arrived = await read_arrivals(kafka_upstream.bootstrap, topic, 3, LINGER_S)
    assert [record.value for record in arrived] == [b"now", b"later", b"later too"]
    after = last_of_each_key(committed_records(kafka_upstream.bootstrap, topic, partitions=1))
    assert {key: value for (_, key), (_, value) in after.items()} == {
        b"k1": b"later",
        b"k2": b"later too",
    }
    assert exactly_once_each(read_view(both.bootstrap, topic, dict(after))) == after
