"""``T.full`` through gateways in front of Apache Kafka: a consumer of ``T.full`` through any
gateway reads exactly the latest committed record of each key of ``T``, at ``T``'s
offsets, as on kshim's broker (docs/full-data-view.md); the view's partitions are owned by
the gateways of one group, and when the owner of one is killed with kill -9 another takes
it over, rebuilds it from the cluster, and a reader that was streaming it goes on to the
same exact view."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from kshim.testing import GatewayProcess, KafkaProcess
from tests.gateway.delay_clients import unique, wait_for_log
from tests.gateway.full_records import (
    PARTITIONS,
    WAIT_S,
    View,
    create_topic,
    exactly_once_each,
    poll_view,
    produce_for_view,
    read_view,
    view_consumer,
)

pytestmark = pytest.mark.timeout(180)
SERVING = "serving full-data views"


def _gateways(log_dir: str, upstream: str, group: str) -> list[GatewayProcess]:
    options = ["--full", "--full-group", group, "--full-session-timeout-ms", "1000"]
    gateways = [GatewayProcess(log_dir, upstream, options=options) for _ in range(2)]
    for gateway in gateways:
        gateway.start()
        wait_for_log(gateway, SERVING)
    return gateways


@pytest.fixture
def gateways(
    kafka_upstream: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    log_dir = str(tmp_path_factory.mktemp("gw-full"))
    running = _gateways(log_dir, kafka_upstream.bootstrap, unique("full-group"))
    yield running
    for gateway in running:
        gateway.stop()


def _bootstrap(gateways: Sequence[GatewayProcess]) -> str:
    return ",".join(gateway.bootstrap for gateway in gateways)


def test_a_view_through_any_gateway_is_the_latest_committed_record_of_each_key(
    kafka_upstream: KafkaProcess, gateways: list[GatewayProcess]
) -> None:
    topic = unique("full-orders")
    asyncio.run(create_topic(kafka_upstream.bootstrap, topic))
    view: View = {}
    produce_for_view(gateways[0].bootstrap, topic, range(3), view)
    read_view(_bootstrap(gateways), topic, dict(view))  # until the owners have built it
    for gateway in gateways:  # through either, from a fresh start: each key once
        assert exactly_once_each(read_view(gateway.bootstrap, topic, dict(view))) == dict(view)


def test_a_produce_to_a_view_is_refused(
    kafka_upstream: KafkaProcess, gateways: list[GatewayProcess]
) -> None:
    topic = unique("full-readonly")
    asyncio.run(create_topic(kafka_upstream.bootstrap, topic))
    read_view(gateways[0].bootstrap, topic, {}, seconds=10)  # names the view: it exists now
    producer = Producer({"bootstrap.servers": gateways[0].bootstrap, "retries": 0})
    errors: list[KafkaError] = []
    producer.produce(f"{topic}.full", b"v", key=b"k", partition=0,
                     on_delivery=lambda error, _: errors.append(error))  # fmt: skip
    producer.flush(30)
    assert [error.code() for error in errors] == [KafkaError.INVALID_REQUEST]


def _owner_of(bootstrap: str, topic: str, partition: int) -> int:
    """The port of the gateway the cluster's metadata names as ``topic``-``partition``'s
    leader."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("meta")})
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            metadata = consumer.list_topics(topic, timeout=10)
            leader = metadata.topics[topic].partitions[partition].leader
            if leader >= 0:
                return metadata.brokers[leader].port  # type: ignore[no-any-return]
            time.sleep(0.2)
    except KafkaException as error:
        raise AssertionError(f"no metadata for {topic}: {error}") from error
    finally:
        consumer.close()
    raise AssertionError(f"no gateway owns {topic}-{partition}")


def test_the_owner_killed_another_gateway_rebuilds_the_view_and_readers_go_on(
    kafka_upstream: KafkaProcess, gateways: list[GatewayProcess]
) -> None:
    topic = unique("full-failover")
    asyncio.run(create_topic(kafka_upstream.bootstrap, topic))
    view: View = {}
    produce_for_view(gateways[0].bootstrap, topic, range(2), view)
    streaming = view_consumer(_bootstrap(gateways), topic)
    try:
        read = poll_view(streaming, dict(view), [])
        port = _owner_of(_bootstrap(gateways), f"{topic}.full", 0)
        victim = next(g for g in gateways if g.bootstrap.endswith(f":{port}"))
        survivor = next(g for g in gateways if g is not victim)
        victim.kill()  # kill -9
        produce_for_view(survivor.bootstrap, topic, range(2, 4), view)
        poll_view(streaming, dict(view), read)  # the reader goes on, to the same view
    finally:
        streaming.close()
    for partition in range(PARTITIONS):  # never sent back to the start: no offset again
        offsets = [offset for p, offset, _, _ in read if p == partition]
        assert offsets == sorted(set(offsets))
    assert exactly_once_each(read_view(survivor.bootstrap, topic, dict(view))) == view
