"""What a new user of the special topics is told: ``T.delay`` named before ``T`` exists
(auto-created with ``T``, or refused with the reason), and why a produce to ``T.full``, a
bad delay record or a read of ``T.delay`` is refused, logged once per kind, topic and
minute (broker/refusal_log.py). A real Broker over the in-memory log store; its fake
clock is also the refusal log's monotonic clock.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.api.records import fetch, metadata
from kshim.api.records import produce as produce_api
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.delay.naming import DELIVER_AT_HEADER
from kshim.broker.refusal_log import INTERVAL_MS, REMEMBERED, RefusalLog
from kshim.broker.topic_resolver import TopicKind
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kshim.protocol.metadata_request import MetadataRequest
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.records import Header, Record, build_batch
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.testing import FakeClock
from tests.broker.handler_calls import context, decoded

NOW = 1_700_000_000_000
PRODUCE, FETCH, METADATA = 0, 1, 3
PRODUCE_VERSION, FETCH_VERSION, METADATA_VERSION = 9, 12, 12
CLIENT = "unit-test"  # handler_calls.context's client id
NUM_PARTITIONS = 3  # the broker's num.partitions: what an auto-created topic gets
EXISTING = "orders"  # created by the fixture, with one partition
DUE_NOW = ((DELIVER_AT_HEADER, str(NOW).encode()),)
REFUSAL_LOGGER = "kshim.broker.refusal_log"
NO_TARGET_REASON = "create new first: new.delay delays records for new, which does not exist"
NO_TARGET_LINE = (
    "{request} refused: topic new.delay, client 'unit-test', UNKNOWN_TOPIC_OR_PARTITION: "
    + NO_TARGET_REASON
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


async def open_broker(data_dir: Path, clock: FakeClock, **settings: str) -> Broker:
    values = {
        "log.dirs": str(data_dir),
        "kshim.full.view.process": "false",
        "num.partitions": str(NUM_PARTITIONS),
        **settings,
    }
    broker = Broker(BrokerConfig.load([values]), clock=clock, logs=MemoryLogStore(clock))
    await broker.start()
    await broker.topics.create(EXISTING, 1, {})
    return broker


@pytest.fixture
async def broker(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Broker]:
    """Auto-creation on (Kafka's default), ``orders`` with one partition."""
    opened = await open_broker(tmp_path, clock)
    yield opened
    await opened.close()


@pytest.fixture
async def strict_broker(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Broker]:
    """``auto.create.topics.enable=false``, ``orders`` with one partition."""
    opened = await open_broker(tmp_path, clock, **{"auto.create.topics.enable": "false"})
    yield opened
    await opened.close()


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        entry.getMessage()
        for entry in caplog.records
        if entry.name == REFUSAL_LOGGER and entry.levelno == logging.WARNING
    ]


async def metadata_of(broker: Broker, name: str, allow_auto_creation: bool = True) -> Any:
    request = MetadataRequest(topics=(name,), allow_auto_topic_creation=allow_auto_creation)
    parts = await metadata.handle(request, context(broker, METADATA, METADATA_VERSION))
    [topic] = decoded(METADATA, METADATA_VERSION, parts).topics
    return topic


async def listed_names(broker: Broker) -> list[str]:
    """The names Metadata for all topics answers: what a pattern subscription matches."""
    request = MetadataRequest(topics=None)
    parts = await metadata.handle(request, context(broker, METADATA, METADATA_VERSION))
    return sorted(topic.name for topic in decoded(METADATA, METADATA_VERSION, parts).topics)


async def produce(broker: Broker, topic: str, headers: tuple[Header, ...] = DUE_NOW) -> Any:
    """Produce (v9) of one record to partition 0 of ``topic``; the partition's answer."""
    batch = memoryview(build_batch([Record(0, NOW, b"k", b"v", headers)]))
    request = ProduceRequest(None, -1, 5000, (TopicData(topic, (PartitionData(0, batch),)),))
    answer = await produce_api.handle(request, context(broker, PRODUCE, PRODUCE_VERSION))
    [result] = decoded(PRODUCE, PRODUCE_VERSION, answer).responses[0].partition_responses
    return result


async def fetch_answers(broker: Broker, *topics: str) -> dict[str, Any]:
    """Partition 0 of each topic fetched from offset 0: its answer, by topic."""
    wanted = [FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]
    request = FetchRequest(topics=[FetchTopic(topic=name, partitions=wanted) for name in topics])
    parts = await fetch.handle(request, context(broker, FETCH, FETCH_VERSION))
    answer = decoded(FETCH, FETCH_VERSION, parts)
    return {topic.topic: topic.partitions[0] for topic in answer.responses}


# == the refusal log ========================================================================


def test_a_refusal_is_logged_once_per_kind_topic_and_minute(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=REFUSAL_LOGGER)
    log = RefusalLog(clock)
    refused = ErrorCode.invalid_request
    assert log.refused("Produce", "a.full", "app", refused, "read-only")
    assert lines(caplog) == [
        "Produce refused: topic a.full, client 'app', INVALID_REQUEST: read-only"
    ]
    clock.advance(INTERVAL_MS - 1)
    assert not log.refused("Produce", "a.full", "other-app", refused, "read-only")
    assert log.refused("Produce", "b.full", "app", refused, "read-only")  # another topic
    assert log.refused("Produce", "a.full", "app", ErrorCode.invalid_record, "bad")  # kind
    clock.advance(1)
    assert log.refused("Produce", "a.full", "app", refused, "read-only")  # a minute on
    assert len(lines(caplog)) == 4


def test_the_refusal_log_forgets_what_it_logged_over_a_minute_ago(clock: FakeClock) -> None:
    log = RefusalLog(clock)
    unknown = ErrorCode.unknown_topic_or_partition
    for index in range(3 * REMEMBERED):  # a new name every 0.6 s, each logged once
        assert log.refused("Metadata", f"t{index}.delay", None, unknown, "create it first")
        clock.advance(INTERVAL_MS // 100)
    assert log.remembered <= REMEMBERED


# == T.delay named before T =================================================================


async def test_naming_the_companion_of_a_new_topic_auto_creates_both(broker: Broker) -> None:
    answer = await metadata_of(broker, "new.delay")
    assert (answer.name, answer.error_code) == ("new.delay", ErrorCode.none)
    assert len(answer.partitions) == NUM_PARTITIONS
    target = broker.resolver.resolve("new")
    assert target is not None and target.kind is TopicKind.LOG
    # What auto-creation gives any topic: num.partitions and no configs of its own.
    assert (target.partition_count, target.stored.record.configs) == (NUM_PARTITIONS, {})
    companion = broker.resolver.resolve("new.delay")
    assert companion is not None and companion.kind is TopicKind.DELAY
    assert (await produce(broker, "new.delay")).error_code == ErrorCode.none
    # Listed for pattern subscriptions: the new topic, never its companion.
    assert await listed_names(broker) == ["new", EXISTING]


async def test_a_request_that_allows_no_auto_creation_creates_nothing(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=REFUSAL_LOGGER)
    answer = await metadata_of(broker, "new.delay", allow_auto_creation=False)
    assert answer.error_code == ErrorCode.unknown_topic_or_partition
    assert broker.resolver.resolve("new") is None
    assert broker.resolver.resolve("new.delay") is None
    assert lines(caplog) == [NO_TARGET_LINE.format(request="Metadata")]


async def test_without_auto_creation_the_missing_topic_is_the_reason_logged_once_a_minute(
    strict_broker: Broker, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=REFUSAL_LOGGER)
    for _ in range(3):  # a producer asks again and again
        answer = await metadata_of(strict_broker, "new.delay")
        assert answer.error_code == ErrorCode.unknown_topic_or_partition
    written = await produce(strict_broker, "new.delay")
    assert written.error_code == ErrorCode.unknown_topic_or_partition
    assert written.error_message == NO_TARGET_REASON
    assert strict_broker.resolver.resolve("new") is None
    assert strict_broker.resolver.resolve("new.delay") is None
    assert lines(caplog) == [NO_TARGET_LINE.format(request="Metadata")]
    clock.advance(INTERVAL_MS)
    await metadata_of(strict_broker, "new.delay")
    assert len(lines(caplog)) == 2
    # The companion of an existing topic is still created when named.
    assert (await metadata_of(strict_broker, "orders.delay")).error_code == ErrorCode.none


# == refusals and their reasons =============================================================


async def test_produce_to_a_view_is_refused_and_logged_once_a_minute(
    broker: Broker, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=REFUSAL_LOGGER)
    reason = "orders.full is a read-only full-data view; produce to its topic instead"
    for _ in range(3):
        written = await produce(broker, "orders.full")
        assert (written.error_code, written.error_message) == (ErrorCode.invalid_request, reason)
    assert lines(caplog) == [
        f"Produce refused: topic orders.full, client '{CLIENT}', INVALID_REQUEST: {reason}"
    ]
    clock.advance(INTERVAL_MS)
    await produce(broker, "orders.full")
    assert len(lines(caplog)) == 2


async def test_a_bad_delay_record_is_refused_and_logged(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=REFUSAL_LOGGER)
    assert (await metadata_of(broker, "orders.delay")).error_code == ErrorCode.none
    written = await produce(broker, "orders.delay", headers=())
    assert written.error_code == ErrorCode.invalid_record
    [line] = lines(caplog)
    assert line == (
        f"Produce refused: topic orders.delay, client '{CLIENT}', INVALID_RECORD: "
        f"{written.error_message}"
    )
    assert DELIVER_AT_HEADER in line


async def test_reading_a_delay_companion_is_an_invalid_topic_logged_once_a_minute(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=REFUSAL_LOGGER)
    assert (await metadata_of(broker, "orders.delay")).error_code == ErrorCode.none
    assert (await produce(broker, EXISTING, headers=())).error_code == ErrorCode.none
    for _ in range(3):  # a consumer assigned T.delay fetches again and again
        answers = await fetch_answers(broker, "orders.delay", EXISTING)
        assert answers["orders.delay"].error_code == ErrorCode.invalid_topic_exception
        # A consumer of T in the same request reads it as usual.
        assert (answers[EXISTING].error_code, answers[EXISTING].high_watermark) == (0, 1)
        assert answers[EXISTING].records
    assert lines(caplog) == [
        f"Fetch refused: topic orders.delay, client '{CLIENT}', INVALID_TOPIC_EXCEPTION: "
        "orders.delay is write-only: its records appear in orders when due; read that instead"
    ]
