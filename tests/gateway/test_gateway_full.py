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
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from kshim.testing import GatewayProcess, KafkaProcess
from tests.gateway.delay_clients import unique, wait_for_log

pytestmark = pytest.mark.timeout(180)
PARTITIONS = 2
SERVING = "serving full-data views"
WAIT_S = 60.0

# (partition, key) -> (offset, value): None for a tombstone.
View = dict[tuple[int, bytes], tuple[int, bytes | None]]


async def _create(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()


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


def _produce(bootstrap: str, topic: str, rounds: range, view: View) -> None:
    """Keyed updates, tombstones and records without a key to both partitions, plus one
    committed and one aborted transaction; ``view`` gets what a view must hold."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for round_ in rounds:
        for index in range(20):
            partition, key = index % PARTITIONS, b"k%d" % index
            value = None if (round_ + index) % 7 == 0 else b"v%d-%d" % (round_, index)
            _send(producer, topic, partition, key, value, view)
        producer.produce(topic, value=b"no key", partition=0)
    assert producer.flush(30) == 0
    _transactions(bootstrap, topic, rounds.stop, view)


def _send(
    producer: Producer, topic: str, partition: int, key: bytes, value: bytes | None, view: View
) -> None:
    def stored(error: KafkaError | None, message: object) -> None:
        assert error is None, error
        view[(partition, key)] = (message.offset(), value)  # type: ignore[attr-defined]

    producer.produce(topic, value=value, key=key, partition=partition, on_delivery=stored)


def _transactions(bootstrap: str, topic: str, round_: int, view: View) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("full-tx")})
    producer.init_transactions(30)
    committed: View = {}
    for commit in (False, True):
        producer.begin_transaction()
        for index in (1, 2):
            target = committed if commit else {}
            _send(producer, topic, index % PARTITIONS, b"k%d" % index, b"tx%d" % round_, target)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    view.update(committed)


Read = list[tuple[int, int, bytes, bytes | None]]  # partition, offset, key, value


def _consumer(bootstrap: str, topic: str) -> Consumer:
    """A consumer of ``topic``.full in a group of its own, from the start."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("full-reader"),
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "topic.metadata.refresh.interval.ms": 1000, "session.timeout.ms": 6000,
    })  # fmt: skip
    consumer.subscribe([f"{topic}.full"])
    return consumer


def _poll(consumer: Consumer, until: View, read: Read, seconds: float = WAIT_S) -> Read:
    """Adds to ``read`` what ``consumer`` reads until the latest record of each key read
    is ``until`` and a second more has brought nothing."""
    latest: View = {(p, k): (o, v) for p, o, k, v in read}
    deadline = time.monotonic() + seconds
    quiet_since = None
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error():
            if latest == until:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 1.0:
                    return read
            continue
        quiet_since = None
        entry = (message.partition(), message.offset(), message.key(), message.value())
        read.append(entry)
        latest[(entry[0], entry[2])] = (entry[1], entry[3])
    raise AssertionError(f"read {len(read)} records of the view, never the {len(until)} keys")


def _read(bootstrap: str, topic: str, until: View, seconds: float = WAIT_S) -> Read:
    """Every record a new consumer reads of ``topic``.full until it holds ``until``."""
    consumer = _consumer(bootstrap, topic)
    try:
        return _poll(consumer, until, [], seconds)
    finally:
        consumer.close()


def _exactly(read: Sequence[tuple[int, int, bytes, bytes | None]]) -> View:
    view: View = {}
    for partition, offset, key, value in read:
        assert (partition, key) not in view, f"{key!r} read twice from a fresh start"
        view[(partition, key)] = (offset, value)
    return view


def test_a_view_through_any_gateway_is_the_latest_committed_record_of_each_key(
    kafka_upstream: KafkaProcess, gateways: list[GatewayProcess]
) -> None:
    topic = unique("full-orders")
    asyncio.run(_create(kafka_upstream.bootstrap, topic))
    view: View = {}
    _produce(gateways[0].bootstrap, topic, range(3), view)
    _read(_bootstrap(gateways), topic, dict(view))  # until the owners have built it
    for gateway in gateways:  # through either, from a fresh start: each key once
        assert _exactly(_read(gateway.bootstrap, topic, dict(view))) == dict(view)


def test_a_produce_to_a_view_is_refused(
    kafka_upstream: KafkaProcess, gateways: list[GatewayProcess]
) -> None:
    topic = unique("full-readonly")
    asyncio.run(_create(kafka_upstream.bootstrap, topic))
    _read(gateways[0].bootstrap, topic, {}, seconds=10)  # names the view: it exists now
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
    asyncio.run(_create(kafka_upstream.bootstrap, topic))
    view: View = {}
    _produce(gateways[0].bootstrap, topic, range(2), view)
    streaming = _consumer(_bootstrap(gateways), topic)
    try:
        read = _poll(streaming, dict(view), [])
        port = _owner_of(_bootstrap(gateways), f"{topic}.full", 0)
        victim = next(g for g in gateways if g.bootstrap.endswith(f":{port}"))
        survivor = next(g for g in gateways if g is not victim)
        victim.kill()  # kill -9
        _produce(survivor.bootstrap, topic, range(2, 4), view)
        _poll(streaming, dict(view), read)  # the reader goes on, to the same view
    finally:
        streaming.close()
    for partition in range(PARTITIONS):  # never sent back to the start: no offset again
        offsets = [offset for p, offset, _, _ in read if p == partition]
        assert offsets == sorted(set(offsets))
    assert _exactly(_read(survivor.bootstrap, topic, dict(view))) == view
