"""kshim's pytest plugin as a user meets it: test files that use only its fixtures, run by a
pytest of their own (pytester, in a subprocess) that loads the plugin from kshim's
``pytest11`` entry point, with nothing configured.

The users' tests produce with acks=all and read back with kafka-python, aiokafka and
confluent-kafka; the factory's brokers keep every acknowledged record across a clean restart
and across kill -9. The start time the plugin reports is printed (``-rP`` shows it), never
asserted: the time a start takes depends on the machine.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

pytest_plugins = ["pytester"]

INNER_RUN_TIMEOUT_S = 300
CLIENT_TIMEOUT_S = 30.0

# Helpers of the users' test files: produce with acks=all, read back from offset 0.
USER_HELPERS = '''
import time

from confluent_kafka import Consumer, Producer, TopicPartition

WAIT_S = 30


def produce_acknowledged(bootstrap, topic, values):
    """Produces with acks=all; returns the offsets the broker acknowledged."""
    offsets = []

    def on_delivery(error, message):
        assert error is None, error
        offsets.append(message.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value, on_delivery=on_delivery)
    assert producer.flush(WAIT_S) == 0
    return offsets


def read_values(bootstrap, topic, count):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = [], time.monotonic() + WAIT_S
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values
'''

THREE_CLIENTS = """
import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

BOOTSTRAPS = set()


def test_kafka_python(kafka_bootstrap):
    BOOTSTRAPS.add(kafka_bootstrap)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    producer.send("orders", key=b"o-1", value=b"tea").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        "orders", bootstrap_servers=kafka_bootstrap, group_id="billing",
        auto_offset_reset="earliest",
    )
    records = []
    for _ in range(60):
        for batch in consumer.poll(timeout_ms=500).values():
            records += [(record.key, record.value) for record in batch]
        if records:
            break
    consumer.close()
    assert records == [(b"o-1", b"tea")]


def test_aiokafka(kafka_bootstrap):
    BOOTSTRAPS.add(kafka_bootstrap)

    async def produce_and_consume():
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        await producer.start()
        await producer.send_and_wait("payments", b"10 EUR", key=b"p-1")
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "payments", bootstrap_servers=kafka_bootstrap, group_id="ledger",
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            record = await asyncio.wait_for(consumer.getone(), 30)
        finally:
            await consumer.stop()
        return record.key, record.value

    assert asyncio.run(produce_and_consume()) == (b"p-1", b"10 EUR")


def test_confluent_kafka(kafka_bootstrap):
    BOOTSTRAPS.add(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
    producer.produce("shipments", key=b"s-1", value=b"parcel")
    assert producer.flush(30) == 0
    consumer = Consumer({
        "bootstrap.servers": kafka_bootstrap, "group.id": "dispatch",
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe(["shipments"])
    messages = consumer.consume(num_messages=1, timeout=30)
    consumer.close()
    assert [(m.key(), m.value()) for m in messages] == [(b"s-1", b"parcel")]


def test_one_broker_serves_the_whole_run(kafka_bootstrap):
    assert BOOTSTRAPS == {kafka_bootstrap}
"""

FACTORY_DURABILITY = """
from helpers import produce_acknowledged, read_values

STARTED = []


def test_a_clean_restart_keeps_acknowledged_records(kafka_broker_factory):
    broker = kafka_broker_factory()
    STARTED.append(broker)
    bootstrap = broker.bootstrap
    assert produce_acknowledged(bootstrap, "ledger", [b"a", b"b", b"c"]) == [0, 1, 2]
    broker.restart()
    assert broker.bootstrap == bootstrap
    assert read_values(bootstrap, "ledger", 3) == [b"a", b"b", b"c"]


def test_kill_9_keeps_acknowledged_records(kafka_broker_factory):
    broker = kafka_broker_factory()
    STARTED.append(broker)
    assert produce_acknowledged(broker.bootstrap, "ledger", [b"d", b"e"]) == [0, 1]
    broker.kill()
    assert not broker.is_running()
    broker.restart()
    assert produce_acknowledged(broker.bootstrap, "ledger", [b"f"]) == [2]
    assert read_values(broker.bootstrap, "ledger", 3) == [b"d", b"e", b"f"]


def test_each_broker_is_fresh_and_stopped_after_its_test(kafka_broker_factory):
    first, second = kafka_broker_factory(), kafka_broker_factory()
    assert first.bootstrap != second.bootstrap
    assert produce_acknowledged(first.bootstrap, "ledger", [b"g"]) == [0]
    second.stop()
    assert not second.is_running()
    assert [broker.process for broker in STARTED] == [None, None]
"""

OPTIONS = """
from confluent_kafka.admin import AdminClient

from helpers import produce_acknowledged


def describe(bootstrap, topic):
    produce_acknowledged(bootstrap, topic, [b"x"])  # created on first use
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return metadata.cluster_id, len(metadata.topics[topic].partitions)


def test_the_run_settings_apply_to_kafka_bootstrap(kafka_bootstrap):
    # cluster.id from the ini file; num.partitions from --kshim-set, over the ini file's.
    assert describe(kafka_bootstrap, "audit") == ("from-ini", 3)


def test_a_factory_brokers_settings_go_over_the_runs(kafka_broker_factory):
    broker = kafka_broker_factory({"num.partitions": 5, "auto.create.topics.enable": True})
    assert describe(broker.bootstrap, "audit") == ("from-ini", 5)
"""

EXTERNAL = """
from helpers import produce_acknowledged


def test_kafka_bootstrap_is_the_external_cluster(kafka_bootstrap):
    assert kafka_bootstrap == "{bootstrap}"
    produce_acknowledged(kafka_bootstrap, "{topic}", [b"from the inner run"])
"""

NEEDS_A_BROKER = """
def test_needs_a_broker(kafka_bootstrap):
    pass
"""


@pytest.fixture
def users_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An empty project with the users' helpers, whose pytest loads plugins as a user's does."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    pytester.makepyfile(helpers=USER_HELPERS)
    pytester.syspathinsert()
    return pytester


def run(project: pytest.Pytester, *arguments: str) -> pytest.RunResult:
    return project.runpytest_subprocess(
        "-p", "no:cacheprovider", *arguments, timeout=INNER_RUN_TIMEOUT_S
    )


def kshim_summary(result: pytest.RunResult) -> list[str]:
    """The lines of the plugin's terminal summary section."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith("-") and " kshim " in line)
    return [line for line in lines[start + 1 :] if line.startswith("kafka_")]


def test_a_users_suite_runs_on_kafka_bootstrap_with_three_clients(
    users_project: pytest.Pytester,
) -> None:
    users_project.makepyfile(test_clients=THREE_CLIENTS)
    result = run(users_project)
    result.assert_outcomes(passed=4)
    summary = kshim_summary(result)
    print("\n".join(summary))  # the measured start, for the report (-rP)
    assert len(summary) == 1
    result.stdout.fnmatch_lines(
        ["kafka_bootstrap: kshim at 127.0.0.1:* started in * s (log: *kshim-session0/data.log)"]
    )


def test_factory_brokers_keep_acknowledged_records_across_restart_and_kill(
    users_project: pytest.Pytester,
) -> None:
    users_project.makepyfile(test_durability=FACTORY_DURABILITY)
    result = run(users_project)
    result.assert_outcomes(passed=3)
    print("\n".join(kshim_summary(result)))
    result.stdout.fnmatch_lines(["kafka_broker_factory: 4 brokers, 6 starts, * s each"])


def test_settings_come_from_the_ini_file_the_command_line_and_the_factory_call(
    users_project: pytest.Pytester,
) -> None:
    users_project.makeini(
        """
        [pytest]
        kshim_broker_config =
            cluster.id=from-ini
            num.partitions=2
        kshim_start_timeout = 30
        """
    )
    users_project.makepyfile(test_options=OPTIONS)
    run(users_project, "--kshim-set", "num.partitions=3").assert_outcomes(passed=2)


def test_the_start_timeout_comes_from_the_ini_file_then_the_command_line(
    users_project: pytest.Pytester,
) -> None:
    users_project.makeini("[pytest]\nkshim_start_timeout = 0.002\n")
    users_project.makepyfile(test_needs_a_broker=NEEDS_A_BROKER)
    from_ini = run(users_project)
    from_ini.assert_outcomes(errors=1)
    from_ini.stdout.fnmatch_lines(["*TimeoutError: kshim did not listen on * within 0.002 s*"])
    from_command_line = run(users_project, "--kshim-start-timeout", "0.001")
    from_command_line.stdout.fnmatch_lines(["*within 0.001 s*"])


def test_a_setting_the_broker_refuses_fails_the_start_with_its_message(
    users_project: pytest.Pytester,
) -> None:
    users_project.makepyfile(test_needs_a_broker=NEEDS_A_BROKER)
    result = run(users_project, "--kshim-set", "num.partitions=zero")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*BrokerExited: kshim exited with status 2 before listening on *",
            "*kshim: error: Invalid value zero for configuration num.partitions (from --set): "
            "Not a number of type INT*",
        ]
    )


@pytest.mark.parametrize(
    "arguments",
    [("--kshim-set", "no-equals-sign"), ("--kshim-start-timeout", "0")],
    ids=["setting", "timeout"],
)
def test_a_malformed_option_stops_the_run(
    users_project: pytest.Pytester, arguments: tuple[str, ...]
) -> None:
    users_project.makepyfile(test_needs_a_broker=NEEDS_A_BROKER)
    result = run(users_project, *arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: kshim *: expected *"])


def test_the_plugin_loads_by_its_entry_point_name_with_autoload_off(
    users_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "-p kshim" names the entry point: it loads the plugin once, with or without autoload.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    users_project.makepyfile(test_needs_a_broker=NEEDS_A_BROKER)
    run(users_project, "-p", "kshim").assert_outcomes(passed=1)
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    run(users_project, "-p", "kshim").assert_outcomes(passed=1)


@pytest.mark.parametrize("source", ["command line", "ini file"])
def test_an_external_bootstrap_is_used_and_nothing_started(
    users_project: pytest.Pytester, kafka_bootstrap: str, source: str
) -> None:
    # The outer run's own kafka_bootstrap stands for the external cluster.
    topic = f"external-{uuid.uuid4().hex}"
    users_project.makepyfile(test_external=EXTERNAL.format(bootstrap=kafka_bootstrap, topic=topic))
    if source == "ini file":
        users_project.makeini(f"[pytest]\nkafka_bootstrap = {kafka_bootstrap}\n")
        result = run(users_project)
    else:
        result = run(users_project, "--kafka-bootstrap", kafka_bootstrap)
    result.assert_outcomes(passed=1)
    assert kshim_summary(result) == [f"kafka_bootstrap: the external cluster at {kafka_bootstrap}"]
    assert read_values(kafka_bootstrap, topic, 1) == [b"from the inner run"]


def read_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Up to ``count`` record values of partition 0 of ``topic``, from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "outer-reader"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        messages = consumer.consume(num_messages=count, timeout=CLIENT_TIMEOUT_S)
    finally:
        consumer.close()
    return [message.value() or b"" for message in messages if message.error() is None]


def test_a_run_that_uses_no_fixture_reports_nothing(users_project: pytest.Pytester) -> None:
    users_project.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = run(users_project)
    result.assert_outcomes(passed=1)
    assert not any(" kshim " in line for line in result.outlines)
