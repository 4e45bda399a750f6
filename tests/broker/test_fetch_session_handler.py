"""The Fetch handler in fetch sessions (KIP-227), over the in-memory log store: what an
incremental fetch reads, answers and waits for (api/records/fetch.py, broker/fetch_sessions.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.api.records import fetch, produce
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
)
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.records import BatchSpec, Record, build_batch, iter_records
from kshim.storage.log.memory_log import MemoryLogStore
from tests.broker.handler_calls import context, decoded, memory_broker

NOW_MS = 1_700_000_000_000
FETCH, PRODUCE = 1, 0
FETCH_VERSION, PRODUCE_VERSION = 12, 9
TOPIC, MISSING = "orders", "missing"
PARTITIONS = 3
NO_SESSION, INITIAL, FINAL = 0, 0, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
NO_OFFSET = -1
LONG_WAIT_MS = 30_000  # never reached: an append or the test's own check ends the wait


def clock() -> int:
    return NOW_MS


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with memory_broker(tmp_path, TOPIC, PARTITIONS, clock) as started:
        yield started


async def produce_values(broker: Broker, partition: int, *values: bytes) -> None:
    records = [Record(index, NOW_MS, b"k", value) for index, value in enumerate(values)]
    batch = memoryview(build_batch(records, BatchSpec()))
    request = ProduceRequest(
        None, -1, 5000, (TopicData(TOPIC, (PartitionData(partition, batch),)),)
    )
    answer = await produce.handle(request, context(broker, PRODUCE, PRODUCE_VERSION))
    [topic] = decoded(PRODUCE, PRODUCE_VERSION, answer).responses
    assert [result.error_code for result in topic.partition_responses] == [ErrorCode.none]


def request(
    session_id: int,
    epoch: int,
    named: dict[str, list[int]] | None = None,
    forgotten: dict[str, list[int]] | None = None,
    max_wait_ms: int = 0,
    offset: int = 0,
    isolation_level: int = READ_UNCOMMITTED,
) -> FetchRequest:
    """Fetch from ``offset`` of the ``named`` partitions, waiting for one byte at most
    ``max_wait_ms``."""
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(
                        partition=index, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                    for index in indexes
                ],
            )
            for topic, indexes in (named or {}).items()
        ],
        forgotten_topics_data=[
            ForgottenTopic(topic=topic, partitions=indexes)
            for topic, indexes in (forgotten or {}).items()
        ],
    )


async def call(broker: Broker, fetch_request: FetchRequest, version: int = FETCH_VERSION) -> Any:
    return decoded(
        FETCH, version, await fetch.handle(fetch_request, context(broker, FETCH, version))
    )


def partitions(answer: Any) -> dict[tuple[str, int], Any]:
    return {
        (topic.topic, partition.partition_index): partition
        for topic in answer.responses
        for partition in topic.partitions
    }


def values(partition: Any) -> list[bytes | None]:
    return [record.value for record in iter_records(partition.records or b"")]


async def open_session(broker: Broker, named: dict[str, list[int]]) -> int:
    answer = await call(broker, request(NO_SESSION, INITIAL, named))
    assert answer.error_code == ErrorCode.none
    assert answer.session_id != NO_SESSION
    return int(answer.session_id)


async def waiting(fetching: asyncio.Task[Any]) -> None:
    """Lets the fetch run until it waits for an append; fails if it answers instead."""
    for _ in range(5):
        await asyncio.sleep(0)
    assert not fetching.done()


async def test_an_incremental_fetch_answers_only_the_partition_with_new_records(
    broker: Broker,
) -> None:
    session_id = await open_session(broker, {TOPIC: [0, 1, 2]})
    nothing_new = await call(broker, request(session_id, 1))
    await produce_values(broker, 1, b"a", b"b")

    answer = await call(broker, request(session_id, 2))

    assert (nothing_new.session_id, partitions(nothing_new)) == (session_id, {})
    assert answer.session_id == session_id
    assert list(partitions(answer)) == [(TOPIC, 1)]
    answered = partitions(answer)[(TOPIC, 1)]
    assert (answered.high_watermark, values(answered)) == (2, [b"a", b"b"])


async def test_an_incremental_long_poll_wakes_on_an_append_to_a_partition_it_does_not_name(
    broker: Broker,
) -> None:
    session_id = await open_session(broker, {TOPIC: [0, 1, 2]})
    fetching = asyncio.create_task(call(broker, request(session_id, 1, max_wait_ms=LONG_WAIT_MS)))
    await waiting(fetching)

    await produce_values(broker, 2, b"late")
    answer = await asyncio.wait_for(fetching, timeout=5)

    assert list(partitions(answer)) == [(TOPIC, 2)]
    assert values(partitions(answer)[(TOPIC, 2)]) == [b"late"]


async def test_an_unknown_partition_of_a_session_is_answered_each_time_but_waits(
    broker: Broker,
) -> None:
    """Kafka answers it from KafkaApis' ``erroneous`` list, apart from the reads, so it does
    not end the wait the others are in."""
    session_id = await open_session(broker, {TOPIC: [0], MISSING: [0]})
    fetching = asyncio.create_task(call(broker, request(session_id, 1, max_wait_ms=LONG_WAIT_MS)))
    await waiting(fetching)

    await produce_values(broker, 0, b"x")
    answer = await asyncio.wait_for(fetching, timeout=5)

    answered = partitions(answer)
    assert list(answered) == [(TOPIC, 0), (MISSING, 0)]
    assert answered[(MISSING, 0)].error_code == ErrorCode.unknown_topic_or_partition
    assert answered[(MISSING, 0)].aborted_transactions == ()


async def test_a_long_poll_overtaken_by_its_sessions_next_request_answers_a_bad_epoch(
    broker: Broker,
) -> None:
    session_id = await open_session(broker, {TOPIC: [0]})
    overtaken = asyncio.create_task(call(broker, request(session_id, 1, max_wait_ms=LONG_WAIT_MS)))
    await waiting(overtaken)
    next_one = await call(broker, request(session_id, 2))

    await produce_values(broker, 0, b"x")
    answer = await asyncio.wait_for(overtaken, timeout=5)

    assert (next_one.error_code, next_one.session_id) == (ErrorCode.none, session_id)
    assert answer.error_code == ErrorCode.invalid_fetch_session_epoch
    assert (answer.session_id, answer.responses) == (session_id, ())


async def test_session_errors_answer_no_partition_and_no_session(broker: Broker) -> None:
    session_id = await open_session(broker, {TOPIC: [0]})

    unknown = await call(broker, request(session_id + 1, 1, {TOPIC: [1]}))
    stale = await call(broker, request(session_id, 7, {TOPIC: [1]}))
    current = await call(broker, request(session_id, 1, {TOPIC: [1]}))

    assert (unknown.error_code, unknown.session_id, unknown.responses) == (
        ErrorCode.fetch_session_id_not_found,
        NO_SESSION,
        (),
    )
    assert (stale.error_code, stale.session_id, stale.responses) == (
        ErrorCode.invalid_fetch_session_epoch,
        NO_SESSION,
        (),
    )
    # The errors changed nothing: the next epoch adds partition 1, told for the first time.
    assert (current.error_code, list(partitions(current))) == (ErrorCode.none, [(TOPIC, 1)])


async def test_forgetting_every_partition_closes_the_session(broker: Broker) -> None:
    session_id = await open_session(broker, {TOPIC: [0, 1]})

    emptied = await call(broker, request(session_id, 1, forgotten={TOPIC: [0, 1]}))
    after = await call(broker, request(session_id, 2))

    assert (emptied.error_code, emptied.session_id, emptied.responses) == (0, NO_SESSION, ())
    assert after.error_code == ErrorCode.fetch_session_id_not_found
    assert len(broker.fetch_sessions) == 0


async def test_closing_a_session_answers_its_request_sessionless(broker: Broker) -> None:
    session_id = await open_session(broker, {TOPIC: [0]})
    await produce_values(broker, 2, b"z")

    closing = await call(broker, request(session_id, FINAL, {TOPIC: [2]}))

    assert (closing.error_code, closing.session_id) == (ErrorCode.none, NO_SESSION)
    assert values(partitions(closing)[(TOPIC, 2)]) == [b"z"]
    assert broker.fetch_sessions.session(session_id) is None


async def test_versions_before_7_are_sessionless_whatever_else(broker: Broker) -> None:
    """Fetch v4-v6 carry no session fields: the decoded request holds Kafka's defaults."""
    answer = await call(broker, FetchRequest(topics=request(0, 0, {TOPIC: [0]}).topics), 4)
    opened = await call(broker, request(NO_SESSION, INITIAL, {TOPIC: [0]}), 7)

    assert list(partitions(answer)) == [(TOPIC, 0)]
    assert opened.session_id != NO_SESSION
    assert len(broker.fetch_sessions) == 1


async def test_no_session_is_opened_when_the_cache_has_no_slot(tmp_path: Path) -> None:
    settings = {
        "log.dirs": str(tmp_path),
        "kshim.full.view.process": "false",
        "max.incremental.fetch.session.cache.slots": "0",
    }
    broker = Broker(BrokerConfig.load([settings]), clock=clock, logs=MemoryLogStore(clock))
    await broker.start()
    try:
        await broker.topics.create(TOPIC, 1, {})
        answer = await call(broker, request(NO_SESSION, INITIAL, {TOPIC: [0]}))
    finally:
        await broker.close()

    assert (answer.error_code, answer.session_id) == (ErrorCode.none, NO_SESSION)
    assert list(partitions(answer)) == [(TOPIC, 0)]


@pytest.mark.parametrize("isolation_level", [READ_UNCOMMITTED, READ_COMMITTED])
async def test_a_read_out_of_range_is_answered_without_offsets(
    broker: Broker, isolation_level: int
) -> None:
    """Kafka answers a read that failed with no offsets and no aborted list, whatever the
    isolation level (ReplicaManager.readFromLocalLog's error result); consumers place
    themselves again with ListOffsets, never from these fields."""
    await produce_values(broker, 0, b"a", b"b")

    answer = await call(
        broker, request(NO_SESSION, FINAL, {TOPIC: [0]}, offset=5, isolation_level=isolation_level)
    )

    refused = partitions(answer)[(TOPIC, 0)]
    assert refused.error_code == ErrorCode.offset_out_of_range
    offsets = (refused.high_watermark, refused.last_stable_offset, refused.log_start_offset)
    assert offsets == (NO_OFFSET, NO_OFFSET, NO_OFFSET)
    assert (refused.aborted_transactions, values(refused)) == (None, [])


async def test_a_session_answers_a_read_out_of_range_each_time_then_once_back_in_range(
    broker: Broker,
) -> None:
    """The session keeps what it told (no offsets), as Kafka's CachedPartition does: the
    error is sent at every fetch, the partition's offsets once its reads succeed again."""
    await produce_values(broker, 0, b"a", b"b")
    opened = await call(broker, request(NO_SESSION, INITIAL, {TOPIC: [0]}, offset=5))
    session_id = int(opened.session_id)

    again = await call(broker, request(session_id, 1))
    placed = await call(broker, request(session_id, 2, {TOPIC: [0]}, offset=2))  # at the end
    quiet = await call(broker, request(session_id, 3))

    for refused in (partitions(opened)[(TOPIC, 0)], partitions(again)[(TOPIC, 0)]):
        assert refused.error_code == ErrorCode.offset_out_of_range
        assert (refused.high_watermark, refused.log_start_offset) == (NO_OFFSET, NO_OFFSET)
    back = partitions(placed)[(TOPIC, 0)]
    assert (back.error_code, back.high_watermark, back.log_start_offset) == (ErrorCode.none, 2, 0)
    assert values(back) == []
    assert partitions(quiet) == {}
