"""A kshim broker's topic moved to Apache Kafka with MirrorMaker 2 (examples/mirror), as
docs/gateway.md's "Moving a kshim's topics to a Kafka cluster" says: the copy holds exactly
the topic's committed records, partition by partition and in order (an aborted
transaction's left behind), and a gateway given ``--full`` serves on the cluster a
``T.full`` holding, key for key, what kshim's own ``T.full`` holds, at the copy's offsets."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.connect.classpath import ClasspathError, jars_unavailable_reason
from examples.connect.worker import java_executable
from examples.mirror.mirror_maker import MirrorSettings, mirror_command, mirror_jars, write_files
from kshim.testing import BrokerProcess, GatewayProcess, KafkaProcess, stop_process
from tests.gateway.delay_clients import unique, wait_for_log
from tests.gateway.full_records import (
    Records,
    View,
    committed_records,
    create_topic,
    exactly_once_each,
    last_of_each_key,
    produce_for_view,
    read_view,
)

pytestmark = pytest.mark.timeout(300)
COPY_TIMEOUT_S = 180.0
SERVING = "serving full-data views"


@pytest.fixture
def kshim(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "kshim").start()
    yield broker
    broker.stop()


@pytest.fixture
def java_and_jars() -> tuple[str, list[Path]]:
    """What MirrorMaker runs on: skips when Java or the jars cannot be had."""
    java = java_executable()
    reason = "no java on PATH" if java is None else jars_unavailable_reason()
    if reason is not None or java is None:
        pytest.skip(reason)
    try:
        return java, mirror_jars()
    except ClasspathError as error:
        pytest.skip(str(error))


def test_a_topic_moved_with_mirror_maker_keeps_its_records_and_its_full_data_view(
    kafka_upstream: KafkaProcess,
    kshim: BrokerProcess,
    java_and_jars: tuple[str, list[Path]],
    tmp_path: Path,
) -> None:
    topic = unique("moved")
    asyncio.run(create_topic(kshim.bootstrap, topic))
    source_view: View = {}
    produce_for_view(kshim.bootstrap, topic, range(3), source_view)
    assert exactly_once_each(read_view(kshim.bootstrap, topic, dict(source_view))) == source_view
    source = committed_records(kshim.bootstrap, topic)
    asyncio.run(create_topic(kafka_upstream.bootstrap, topic))  # step 1: T on the cluster

    with mirror_maker(java_and_jars, kshim, kafka_upstream, topic, tmp_path):
        copy = copied(kafka_upstream.bootstrap, topic, _without_offsets(source))

    copy_view = last_of_each_key(copy)
    with gateway(kafka_upstream, tmp_path) as front:
        served = exactly_once_each(read_view(front.bootstrap, topic, dict(copy_view)))
    assert served == copy_view
    assert _values(served) == _values(source_view)


def copied(bootstrap: str, topic: str, wanted: dict[int, list[object]]) -> Records:
    """The copy on the cluster, once it holds ``wanted`` (keys and values by partition)."""
    deadline = time.monotonic() + COPY_TIMEOUT_S
    while True:
        copy = committed_records(bootstrap, topic)
        if _without_offsets(copy) == wanted or time.monotonic() > deadline:
            assert _without_offsets(copy) == wanted
            return copy


def _without_offsets(records: Records) -> dict[int, list[object]]:
    return {partition: [(key, value) for _, key, value in entries]
            for partition, entries in records.items()}  # fmt: skip


def _values(view: View) -> dict[tuple[int, bytes], bytes | None]:
    return {row: value for row, (_, value) in view.items()}


@contextlib.contextmanager
def mirror_maker(
    runtime: tuple[str, list[Path]],
    kshim: BrokerProcess,
    kafka: KafkaProcess,
    topic: str,
    work: Path,
) -> Iterator[None]:
    """MirrorMaker 2 copying ``topic`` from kshim to Kafka until the block ends; ``runtime``
    is java and the jars."""
    settings = MirrorSettings(kshim.bootstrap, kafka.bootstrap, [topic], replication_factor=1)
    properties, logging = write_files(settings, work / "mm2")
    command = mirror_command(*runtime, properties, logging)
    with open(work / "mm2" / "mirror-maker.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        stop_process(process)


@contextlib.contextmanager
def gateway(kafka: KafkaProcess, work: Path) -> Iterator[GatewayProcess]:
    """One gateway given ``--full`` in front of ``kafka`` until the block ends."""
    options = ["--full", "--full-group", unique("moved-full")]
    process = GatewayProcess(work, kafka.bootstrap, options=options).start()
    try:
        wait_for_log(process, SERVING)
        yield process
    finally:
        process.stop()
