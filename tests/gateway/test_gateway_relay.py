"""``kshim gateway`` relaying real clients to a broker: kshim's own (quick), and Apache Kafka
from Maven Central (the reference; skipped with the reason when its jars cannot run)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import kafka
import pytest

from kshim.client.frames import encode_request
from kshim.client.wire import WireConnection
from kshim.testing import BrokerProcess, GatewayProcess, KafkaProcess
from tests.gateway.running_gateway import TIMEOUT_S, UPSTREAM_NODE_ID, RunningGateway


@pytest.fixture(scope="module")
def kshim_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("gw") / "data").start()
    yield broker
    broker.stop()


@pytest.fixture
def gateway(kshim_upstream: BrokerProcess) -> Iterator[RunningGateway]:
    running = RunningGateway(kshim_upstream.bootstrap)
    yield running
    running.stop()


def _produce_and_consume(gateway: RunningGateway, count: int) -> list[bytes]:
    """Records produced and consumed in a group through ``gateway``; checks that the
    clients were only ever told of the gateway's addresses."""
    bootstrap = gateway.bootstrap
    topic = f"gw-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for index in range(count):
        producer.produce(topic, key=b"k%d" % (index % 7), value=b"v%d" % index)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
        consumer.commit(asynchronous=False)  # through the coordinator's gateway address
        brokers = consumer.list_topics(timeout=TIMEOUT_S).brokers
        relayed = ("127.0.0.1", gateway.ports.port_of(UPSTREAM_NODE_ID))
        assert {(broker.host, broker.port) for broker in brokers.values()} == {relayed}
    finally:
        consumer.close()
    return values


def test_clients_produce_and_consume_in_a_group_through_the_gateway(
    gateway: RunningGateway,
) -> None:
    values = _produce_and_consume(gateway, 2_000)
    assert values == [b"v%d" % index for index in range(2_000)]
    assert set(gateway.gateway.topology.brokers) == {UPSTREAM_NODE_ID}


def test_kafka_python_through_the_gateway(gateway: RunningGateway) -> None:
    topic = f"gw-{uuid.uuid4().hex[:8]}"
    producer = kafka.KafkaProducer(bootstrap_servers=gateway.bootstrap)
    try:
        for index in range(100):
            producer.send(topic, b"%d" % index)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=gateway.bootstrap,
        group_id=topic,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    try:
        got = [record.value for _, record in zip(range(100), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == [b"%d" % index for index in range(100)]


def test_an_acks_0_produce_gets_no_answer_and_the_next_answer_still_matches(
    gateway: RunningGateway,
) -> None:
    with WireConnection("127.0.0.1", gateway.port, 10.0) as connection:
        body = {"acks": 0, "timeout": 1000, "topic_data": []}
        connection.send(encode_request(0, 7, 100, body))
        answer = connection.call(
            18, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        assert answer.error_code == 0
        offered = {entry.api_key: entry.max_version for entry in answer.api_keys}
        assert offered[0] <= 9 and offered[1] <= 15  # no answer may name a broker unseen


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_request_sent_as_the_connection_opens_is_relayed(
    kshim_upstream: BrokerProcess, loop: str
) -> None:
    """uvloop delivers bytes read before the relay's broker connection is made, even with
    the client's reading paused: they wait, and go first."""
    running = RunningGateway(kshim_upstream.bootstrap, loop)
    try:
        for _ in range(30):
            with WireConnection("127.0.0.1", running.port, 10.0) as connection:
                assert connection.call(16, 0).error_code == 0  # ListGroups
    finally:
        running.stop()


def test_a_broken_frame_closes_that_connection_only(gateway: RunningGateway) -> None:
    with WireConnection("127.0.0.1", gateway.port, 10.0) as broken:
        broken.send(b"\xff\xff\xff\xf0rubbish")
        broken.wait_closed(10.0)
    with WireConnection("127.0.0.1", gateway.port, 10.0) as healthy:
        assert healthy.call(18, 0).error_code == 0


def test_a_client_is_disconnected_when_its_broker_goes(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    running = RunningGateway(broker.bootstrap)
    try:
        with WireConnection("127.0.0.1", running.port, 10.0) as connection:
            assert connection.call(18, 0).error_code == 0
            broker.kill()
            connection.wait_closed(10.0)
    finally:
        running.stop()
        broker.stop()


def test_apache_kafka_through_the_gateway(kafka_upstream: KafkaProcess) -> None:
    running = RunningGateway(kafka_upstream.bootstrap)
    try:
        values = _produce_and_consume(running, 500)
        assert values == [b"v%d" % index for index in range(500)]
    finally:
        running.stop()


def test_a_gateway_killed_mid_produce_loses_nothing_acknowledged(
    kafka_upstream: KafkaProcess, tmp_path: Path
) -> None:
    """Two gateways in front of Kafka, an idempotent producer bootstrapped to both; the one
    it uses is killed with -9 mid-stream. librdkafka asks the other for metadata, whose
    answer names the same broker at that gateway's port: every record is acknowledged,
    stored once, in order."""
    gateways = [GatewayProcess(tmp_path, kafka_upstream.bootstrap).start() for _ in range(2)]
    topic = f"gw-failover-{uuid.uuid4().hex[:8]}"
    acknowledged: list[int] = []
    failed: list[str] = []

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            acknowledged.append(int(message.value() or b"-1"))

    bootstrap = ",".join(gateway.bootstrap for gateway in gateways)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    try:
        sent = 0
        while len(acknowledged) < 1_000 and sent < 100_000:
            producer.produce(topic, b"%d" % sent, on_delivery=delivered)
            producer.poll(0.001)
            sent += 1
        in_use = [g for g in gateways if _has_client(g)]
        assert in_use, "the producer is connected through neither gateway"
        in_use[0].kill()
        for _ in range(2_000):
            producer.produce(topic, b"%d" % sent, on_delivery=delivered)
            producer.poll(0.001)
            sent += 1
        assert producer.flush(TIMEOUT_S) == 0
    finally:
        for gateway in gateways:
            gateway.stop()
    assert failed == []
    assert sorted(acknowledged) == list(range(sent))
    assert _stored_values(kafka_upstream.bootstrap, topic, sent) == list(range(sent))


def _has_client(gateway: GatewayProcess) -> bool:
    """Whether a client is connected to the gateway's port for the broker (an established
    connection with that local port in /proc/net/tcp; state 01 is ESTABLISHED)."""
    port = f"{gateway.broker_port_base + UPSTREAM_NODE_ID:04X}"
    with open("/proc/net/tcp", encoding="ascii") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return any(row[1].endswith(":" + port) and row[3] == "01" for row in rows)


def _stored_values(bootstrap: str, topic: str, count: int) -> list[int]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[int] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(1_000, 0.5):
                if message.error() is None:
                    values.append(int(message.value() or b"-1"))
    finally:
        consumer.close()
    return values
