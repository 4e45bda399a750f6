"""CreatePartitions and CreateTopics past one batch of Kafka's controller
(MAX_RECORDS_PER_REQUEST records), through decode, handler and encode over the in-memory
log store: what kshim answers and, unlike Kafka 3.9, that a refused request adds nothing
(compat_tests/test_partition_limits.py compares the answers with Kafka's)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.topics import MAX_RECORDS_PER_REQUEST
from kshim.protocol.errors import ErrorCode
from tests.broker.handler_calls import memory_broker
from tests.groups.wire import call

CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
TOPIC = "orders"
LARGEST_COUNT = 2**31 - 1
PROMPTLY_S = 5.0
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with memory_broker(tmp_path, TOPIC, 1) as started:
        yield started


def partition_count(broker: Broker, topic: str) -> int | None:
    resolved = broker.resolver.resolve(topic)
    return None if resolved is None else resolved.partition_count


def grow(*counts: tuple[str, int]) -> dict[str, object]:
    topics = [{"name": name, "count": count, "assignments": None} for name, count in counts]
    return {"topics": topics, "timeout": 10_000, "validate_only": False}


@pytest.mark.parametrize("count", [LARGEST_COUNT, MAX_RECORDS_PER_REQUEST + 2])
async def test_a_count_past_the_batch_adds_nothing_and_is_answered_at_once(
    broker: Broker, count: int
) -> None:
    started = time.monotonic()
    [result] = (await call(broker, CREATE_PARTITIONS, 3, grow((TOPIC, count)))).results

    assert time.monotonic() - started < PROMPTLY_S
    assert (result.error_code, result.error_message) == (ErrorCode.unknown_server_error, None)
    assert partition_count(broker, TOPIC) == 1
    [grown] = (await call(broker, CREATE_PARTITIONS, 3, grow((TOPIC, 2)))).results
    assert (grown.error_code, partition_count(broker, TOPIC)) == (ErrorCode.none, 2)


async def test_the_topics_of_one_request_share_one_batch(broker: Broker) -> None:
    """In request order: what fits is added; the topic past the batch adds nothing, and
    the batch is then full for the topics after it, as Kafka's controller leaves it.
    A topic refused for another reason takes no room."""
    for name in ("second", "third"):
        await broker.topics.create(name, 1, {})
    request = grow(("missing", 9), (TOPIC, 6_001), ("second", 6_001), ("third", 2))

    results = (await call(broker, CREATE_PARTITIONS, 3, request)).results

    assert [result.error_code for result in results] == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.none,
        ErrorCode.unknown_server_error,
        ErrorCode.unknown_server_error,
    ]
    counts = {name: partition_count(broker, name) for name in (TOPIC, "second", "third")}
    assert counts == {TOPIC: 6_001, "second": 1, "third": 1}


async def test_partitions_filling_the_batch_exactly_are_added(broker: Broker) -> None:
    await broker.topics.create("second", 1, {})
    request = grow((TOPIC, 4_001), ("second", 6_001))

    results = (await call(broker, CREATE_PARTITIONS, 3, request)).results

    assert [result.error_code for result in results] == [ErrorCode.none, ErrorCode.none]
    assert (partition_count(broker, TOPIC), partition_count(broker, "second")) == (4_001, 6_001)


async def test_topics_past_the_batch_are_all_refused_and_none_is_created(broker: Broker) -> None:
    """5,001 topics of one partition: 10,002 records."""
    names = [f"many-{index}" for index in range(MAX_RECORDS_PER_REQUEST // 2 + 1)]
    topics = [{"name": name, "num_partitions": 1, "replication_factor": 1} for name in names]

    results = (await call(broker, CREATE_TOPICS, 7, {"topics": topics})).topics

    answers = {
        (result.error_code, result.error_message, result.num_partitions) for result in results
    }
    assert answers == {(ErrorCode.policy_violation, TOO_LARGE_BATCH, -1)}
    assert not any(partition_count(broker, name) for name in names)
