"""Delayed delivery through gateways in front of Apache Kafka: records produced to the
upstream ``T.delay`` appear in ``T`` at their due time, never before, with
``kshim-delayed-from``; cancel and replace by key; and exactly once when one of two
delivering gateways is killed with kill -9 while records are pending and falling due, or
stopped (SIGSTOP) until the other has taken over and then woken, a zombie whose delivery
Kafka must fence."""

from __future__ import annotations

import asyncio
import signal
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kshim.testing import GatewayProcess, KafkaProcess, free_port
from tests.gateway.delay_clients import (
    DELAYED_FROM,
    TAKEN_OVER,
    ToProduce,
    create_topics,
    delay_gateway,
    due_at,
    now_ms,
    produce,
    read_arrivals,
    unique,
    wait_for_log,
)

LINGER_S = 0.5  # after the records expected, for one too many to show
SCRAPE_TIMEOUT_S = 10.0

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def topics(kafka_upstream: KafkaProcess) -> dict[str, str]:
    tests = ("basic", "cancel", "replace", "metrics")
    names = {test: unique(f"delay-{test}") for test in tests}
    asyncio.run(create_topics(kafka_upstream.bootstrap, list(names.values()), 1))
    return names


@pytest.fixture(scope="module")
def metrics_address() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def delivering(
    kafka_upstream: KafkaProcess,
    topics: dict[str, str],
    metrics_address: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    delays = [f"{topic}.delay" for topic in topics.values()]
    log_dir = str(tmp_path_factory.mktemp("gw-delay"))
    group = unique("delay-group")
    gateway = delay_gateway(log_dir, kafka_upstream.bootstrap, group, delays, metrics_address)
    gateway.start()
    wait_for_log(gateway, TAKEN_OVER)
    yield gateway
    gateway.stop()


async def test_a_delayed_record_arrives_when_due_with_where_it_came_from(
    kafka_upstream: KafkaProcess, topics: dict[str, str], delivering: GatewayProcess
) -> None:
    topic = topics["basic"]
    due = now_ms() + 1500
    record = ToProduce(b"order-1", b"cancel-if-unpaid", (due_at(due), ("trace", b"t-1")))
    (offset,) = await produce(kafka_upstream.bootstrap, f"{topic}.delay", [record])
    (arrived,) = await read_arrivals(kafka_upstream.bootstrap, topic, 1, LINGER_S)
    assert arrived.arrived_ms >= due
    assert (arrived.key, arrived.value) == (b"order-1", b"cancel-if-unpaid")
    assert arrived.headers == (*record.headers, (DELAYED_FROM, f"0:{offset}".encode()))
    assert arrived.timestamp <= due - 1000  # its own timestamp, from when it was produced


async def test_cancel_by_key(
    kafka_upstream: KafkaProcess, topics: dict[str, str], delivering: GatewayProcess
) -> None:
    topic = topics["cancel"]
    due = now_ms() + 1000
    records = [
        ToProduce(b"paid", b"reminder", (due_at(due),)),
        ToProduce(b"unpaid", b"reminder", (due_at(due + 300),)),
        ToProduce(b"paid", None, (("kshim-delay-cancel", b""),)),
    ]
    await produce(kafka_upstream.bootstrap, f"{topic}.delay", records)
    arrivals = await read_arrivals(kafka_upstream.bootstrap, topic, 1, LINGER_S)
    assert [arrived.key for arrived in arrivals] == [b"unpaid"]


async def test_replace_by_key(
    kafka_upstream: KafkaProcess, topics: dict[str, str], delivering: GatewayProcess
) -> None:
    topic = topics["replace"]
    due = now_ms() + 1000
    records = [
        ToProduce(b"job", b"first", (due_at(due),)),
        ToProduce(b"job", b"second", (due_at(due + 200), ("kshim-delay-replace", b""))),
        ToProduce(b"other", b"last", (due_at(due + 400),)),
    ]
    await produce(kafka_upstream.bootstrap, f"{topic}.delay", records)
    arrivals = await read_arrivals(kafka_upstream.bootstrap, topic, 2, LINGER_S)
    assert [(a.key, a.value) for a in arrivals] == [(b"job", b"second"), (b"other", b"last")]


async def test_the_gateway_counts_pending_records_lateness_and_its_transactions(
    kafka_upstream: KafkaProcess,
    topics: dict[str, str],
    delivering: GatewayProcess,
    metrics_address: str,
) -> None:
    """The broker's delayed-delivery families, for the partitions this gateway delivers:
    records pending until due, then each record's lateness once its transaction committed,
    which is never less than that transaction's own duration."""
    topic, count = topics["metrics"], 5
    due = now_ms() + 2500
    records = [ToProduce(b"k%d" % index, b"v", (due_at(due),)) for index in range(count)]
    await produce(kafka_upstream.bootstrap, f"{topic}.delay", records)
    pending = f'kshim_delayed_pending{{topic="{topic}"}}'
    filed = await _scraped_until(metrics_address, lambda m: m.get(pending) == count)
    assert filed.get(f'kshim_delayed_lateness_seconds_count{{topic="{topic}"}}', 0) == 0

    await read_arrivals(kafka_upstream.bootstrap, topic, count, LINGER_S)
    lateness = f'kshim_delayed_lateness_seconds_count{{topic="{topic}"}}'
    after = await _scraped_until(metrics_address, lambda m: m.get(lateness) == count)

    assert after[pending] == 0
    assert after[f'kshim_delayed_lateness_seconds_bucket{{le="+Inf",topic="{topic}"}}'] == count
    transactions = after["kshim_gateway_delay_transaction_seconds_count"]
    assert transactions - filed.get("kshim_gateway_delay_transaction_seconds_count", 0) >= 1
    late_s = after[f'kshim_delayed_lateness_seconds_sum{{topic="{topic}"}}']
    took_s = after["kshim_gateway_delay_transaction_seconds_sum"] - filed.get(
        "kshim_gateway_delay_transaction_seconds_sum", 0
    )
    assert late_s >= took_s > 0


async def _scraped_until(
    address: str, condition: Callable[[dict[str, float]], bool]
) -> dict[str, float]:
    deadline = time.monotonic() + SCRAPE_TIMEOUT_S
    while True:
        metrics = await asyncio.to_thread(_scrape, address)
        if condition(metrics) or time.monotonic() > deadline:
            return metrics
        await asyncio.sleep(0.1)


def _scrape(address: str) -> dict[str, float]:
    url = f"http://{address}/metrics"
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as answer:
        text = answer.read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


async def test_exactly_once_when_a_delivering_gateway_is_killed(
    kafka_upstream: KafkaProcess, tmp_path: Path
) -> None:
    bootstrap = kafka_upstream.bootstrap
    topic, group = unique("delay-kill"), unique("delay-group")
    await create_topics(bootstrap, [topic], 2)
    first = delay_gateway(str(tmp_path), bootstrap, group, [f"{topic}.delay"]).start()
    second = delay_gateway(str(tmp_path), bootstrap, group, [f"{topic}.delay"])
    try:
        wait_for_log(first, TAKEN_OVER)
        second.start()
        wait_for_log(second, TAKEN_OVER)  # the group shared the two partitions
        start = now_ms() + 500
        dues = [start + 75 * n for n in range(40)]  # over 3 s, both partitions
        records = [ToProduce(b"k%d" % n, b"v%d" % n, (due_at(due),), n % 2)
                   for n, due in enumerate(dues)]  # fmt: skip
        await produce(bootstrap, f"{topic}.delay", records)
        await asyncio.sleep(max(0.0, (dues[12] - now_ms()) / 1000))  # some delivered, most pending
        first.kill()
        arrivals = await read_arrivals(bootstrap, topic, len(records), 2 * LINGER_S)
        taken_over = second.log_text().count(TAKEN_OVER)  # its own partition, then the other
    finally:
        first.kill()
        second.stop()
    assert taken_over == 2
    copies = Counter(arrived.value for arrived in arrivals)
    assert copies == Counter(record.value for record in records)
    due_of = {record.value: due for record, due in zip(records, dues, strict=True)}
    assert all(arrived.arrived_ms >= due_of[arrived.value] for arrived in arrivals)


async def test_a_gateway_woken_after_its_takeover_delivers_nothing_again(
    kafka_upstream: KafkaProcess, tmp_path: Path
) -> None:
    bootstrap = kafka_upstream.bootstrap
    topic, group = unique("delay-zombie"), unique("delay-group")
    await create_topics(bootstrap, [topic], 1)
    zombie = delay_gateway(str(tmp_path), bootstrap, group, [f"{topic}.delay"]).start()
    other = delay_gateway(str(tmp_path), bootstrap, group, [f"{topic}.delay"])
    try:
        wait_for_log(zombie, TAKEN_OVER)
        first_due = now_ms() + 1500
        records = [ToProduce(b"k%d" % n, b"v%d" % n, (due_at(first_due + 50 * n),))
                   for n in range(20)]  # fmt: skip
        await produce(bootstrap, f"{topic}.delay", records)
        await asyncio.sleep(0.7)  # filed by the zombie-to-be, none due yet
        assert zombie.process is not None
        zombie.process.send_signal(signal.SIGSTOP)
        other.start()
        delivered = await read_arrivals(bootstrap, topic, len(records), 0)
        zombie.process.send_signal(signal.SIGCONT)  # its schedule holds them all, overdue
        await asyncio.sleep(2.0)  # its delivery tried, and fenced
        arrivals = await read_arrivals(bootstrap, topic, len(records), LINGER_S)
    finally:
        if zombie.process is not None:
            zombie.process.send_signal(signal.SIGCONT)
        zombie.stop()
        other.stop()
    assert len(delivered) == len(records)  # by the other gateway, the zombie stopped
    assert Counter(arrived.value for arrived in arrivals) == Counter(r.value for r in records)
