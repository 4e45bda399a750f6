"""Incremental fetch sessions (KIP-227) sent byte for byte: the same Fetch requests and the
same assertions on kshim and on Apache Kafka.

A session is opened by a full fetch (session id 0, epoch 0) and answered with its id; its
next requests carry the id and the next epoch, name only the partitions that changed,
and are answered with only the partitions that have records, an error or new offsets. The
scenarios walk through opening, incremental answers after produces, a long poll woken by
an append to a partition the request does not name, forgetting, a wrong epoch, an unknown
id, the rotation of the partitions that returned data, closing, and a full session cache
(on brokers started here with 8 slots: Kafka splits its slots among 8 shards, so only a
multiple of 8 fills both brokers alike).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest, selection, start_kshim
from compat_tests.kafka_sources import REFERENCE_JARS, jars_command, launched
from compat_tests.support import create_topic, reference
from kshim.client.wire import WireConnection
from kshim.jvm import artifacts
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.records import iter_records
from tests.e2e.client_helpers import sample_records

pytestmark = [pytest.mark.wire, pytest.mark.timeout(120)]

FETCH, VERSION = 1, 12
FIRST_SESSION_VERSION = 7  # KIP-227: session id and epoch, forgotten topics
NO_SESSION, INITIAL, FINAL = 0, 0, -1
NONE, UNKNOWN_TOPIC_OR_PARTITION = 0, 3
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71
UNUSED_SESSION_ID = 123_456_789  # random ids make a clash with a live session unlikely
LONG_POLL_MS = 10_000
APPEND_AFTER_S = 0.5
SMALL_CACHE_SLOTS = 8
SLOTS_SETTING = "max.incremental.fetch.session.cache.slots"
READY_TIMEOUT_S, READY_POLL_S = 10.0, 0.1
FOLLOWER = 5  # a replica id: its sessions are privileged (the broker may answer an error)


def fetch_request(
    session_id: int,
    epoch: int,
    named: dict[str, dict[int, int]] | None = None,
    forgotten: dict[str, list[int]] | None = None,
    *,
    max_wait: int = 0,
    max_bytes: int = 1 << 20,
    replica_id: int = -1,
) -> dict[str, Any]:
    """A Fetch of the ``named`` partitions ({topic: {partition: fetch offset}})."""
    return {
        "replica_id": replica_id,
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": index, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    for index, offset in offsets.items()
                ],
            }
            for topic, offsets in (named or {}).items()
        ],
        "forgotten_topics_data": [
            {"topic": topic, "partitions": indexes} for topic, indexes in (forgotten or {}).items()
        ],
        "rack_id": "",
    }


def answered(response: Any) -> dict[tuple[str, int], Any]:
    return {
        (topic.topic, partition.partition_index): partition
        for topic in response.responses
        for partition in topic.partitions
    }


def summary(response: Any) -> dict[tuple[str, int], tuple[int, int, int]]:
    """Each answered partition's (error, high watermark, records in it)."""
    return {
        key: (int(partition.error_code), partition.high_watermark, record_count(partition))
        for key, partition in answered(response).items()
    }


def record_count(partition: Any) -> int:
    return sum(1 for _ in iter_records(partition.records or b""))


def session_error(response: Any) -> tuple[int, int, int]:
    """(top-level error, session id, partitions answered) of a refused request."""
    return int(response.error_code), response.session_id, len(answered(response))


def ready_topic(broker: BrokerUnderTest, label: str, partitions: int = 1) -> str:
    """A new topic, once every partition answers a Fetch without error: Kafka's partitions
    answer NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION for a moment after
    CreateTopics, and a session opened then would see their offsets change."""
    topic = create_topic(broker, label, partitions)
    request = fetch_request(NO_SESSION, FINAL, {topic: dict.fromkeys(range(partitions), 0)})
    deadline = time.monotonic() + READY_TIMEOUT_S
    with WireConnection(broker.host, broker.port) as connection:
        while True:
            errors = [
                error for error, _, _ in summary(connection.call(FETCH, VERSION, request)).values()
            ]
            if errors == [NONE] * partitions:
                return topic
            assert time.monotonic() < deadline, f"{topic} still answers {errors}"
            time.sleep(READY_POLL_S)


def produce(broker: BrokerUnderTest, topic: str, partition: int, count: int) -> None:
    offsets = reference().produce(
        broker.bootstrap, topic, [sample_records(count)], partition=partition
    )
    assert len(offsets) == count


def test_a_session_answers_what_changed_until_it_is_closed(broker: BrokerUnderTest) -> None:
    topic = ready_topic(broker, "session", partitions=3)
    produce(broker, topic, 0, 3)

    with WireConnection(broker.host, broker.port) as connection:

        def call(*args: Any, **options: Any) -> Any:
            return connection.call(FETCH, VERSION, fetch_request(*args, **options))

        opened = call(NO_SESSION, INITIAL, {topic: {0: 3, 1: 0, 2: 0}})
        session_id = opened.session_id
        idle = call(session_id, 1)
        produce(broker, topic, 1, 2)
        new_records = call(session_id, 2)
        moved_on = call(session_id, 3, {topic: {1: 2}})
        forgot = call(session_id, 4, forgotten={topic: [2]})
        produce(broker, topic, 2, 1)
        after_forgetting = call(session_id, 5)
        wrong_epoch = call(session_id, 7)
        unknown_id = call(UNUSED_SESSION_ID, 6)
        still_open = call(session_id, 6, {topic: {2: 0}})
        closing = call(session_id, FINAL, {topic: {0: 0}})
        closed = call(session_id, 7)

    assert (int(opened.error_code), session_id != NO_SESSION) == (NONE, True)
    assert summary(opened) == {(topic, 0): (0, 3, 0), (topic, 1): (0, 0, 0), (topic, 2): (0, 0, 0)}
    assert (idle.session_id, summary(idle)) == (session_id, {})
    assert summary(new_records) == {(topic, 1): (0, 2, 2)}
    assert summary(moved_on) == {}  # partition 1 named at its end: nothing new to tell
    assert summary(forgot) == {}
    assert summary(after_forgetting) == {}  # partition 2 grew, but it left the session
    assert session_error(wrong_epoch) == (INVALID_FETCH_SESSION_EPOCH, NO_SESSION, 0)
    assert session_error(unknown_id) == (FETCH_SESSION_ID_NOT_FOUND, NO_SESSION, 0)
    # The errors left the session as it was: epoch 6 adds partition 2 back, from offset 0.
    assert (still_open.session_id, summary(still_open)) == (session_id, {(topic, 2): (0, 1, 1)})
    assert (int(closing.error_code), closing.session_id) == (NONE, NO_SESSION)
    assert summary(closing) == {(topic, 0): (0, 3, 3)}
    assert session_error(closed) == (FETCH_SESSION_ID_NOT_FOUND, NO_SESSION, 0)


@pytest.mark.parametrize("version", range(FIRST_SESSION_VERSION, ADVERTISED[FETCH][1] + 1))
def test_every_version_with_session_fields_serves_sessions(
    broker: BrokerUnderTest, version: int
) -> None:
    topic = ready_topic(broker, f"session-v{version}")
    with WireConnection(broker.host, broker.port) as connection:

        def call(*args: Any) -> Any:
            return connection.call(FETCH, version, fetch_request(*args))

        opened = call(NO_SESSION, INITIAL, {topic: {0: 0}})
        idle = call(opened.session_id, 1)
        produce(broker, topic, 0, 2)
        grown = call(opened.session_id, 2)
        closing = call(opened.session_id, FINAL, {topic: {0: 0}})

    assert opened.session_id != NO_SESSION
    assert [summary(answer) for answer in (opened, idle, grown)] == [
        {(topic, 0): (0, 0, 0)},
        {},
        {(topic, 0): (0, 2, 2)},
    ]
    assert (idle.session_id, grown.session_id) == (opened.session_id, opened.session_id)
    assert (closing.session_id, summary(closing)) == (NO_SESSION, {(topic, 0): (0, 2, 2)})


def test_an_incremental_long_poll_wakes_on_an_append_to_its_session(
    broker: BrokerUnderTest,
) -> None:
    """The request names no partition: the append that answers it is to one that only the
    session holds."""
    topic = ready_topic(broker, "session-poll", partitions=2)
    with WireConnection(broker.host, broker.port) as connection:
        opened = connection.call(FETCH, VERSION, fetch_request(0, INITIAL, {topic: {0: 0, 1: 0}}))
        appending = threading.Timer(APPEND_AFTER_S, produce, (broker, topic, 1, 2))
        appending.start()
        started = time.monotonic()
        try:
            woken = connection.call(
                FETCH, VERSION, fetch_request(opened.session_id, 1, max_wait=LONG_POLL_MS)
            )
        finally:
            appending.join()
        waited_s = time.monotonic() - started
        connection.call(FETCH, VERSION, fetch_request(opened.session_id, FINAL))

    assert summary(opened) == {(topic, 0): (0, 0, 0), (topic, 1): (0, 0, 0)}
    assert summary(woken) == {(topic, 1): (0, 2, 2)}
    assert APPEND_AFTER_S <= waited_s < LONG_POLL_MS / 1000 / 2


def test_the_partitions_that_returned_records_are_read_last(broker: BrokerUnderTest) -> None:
    """With room for one batch per response (max_bytes 1: KIP-74 still sends the first),
    the partitions take turns, as Kafka moves each that returned records to the end."""
    topic = ready_topic(broker, "session-turns", partitions=2)
    produce(broker, topic, 0, 2)
    produce(broker, topic, 1, 2)
    with WireConnection(broker.host, broker.port) as connection:

        def call(*args: Any) -> Any:
            return connection.call(FETCH, VERSION, fetch_request(*args, max_bytes=1))

        opened = call(NO_SESSION, INITIAL, {topic: {0: 0, 1: 0}})
        turns = [summary(call(opened.session_id, epoch)) for epoch in (1, 2, 3)]
        call(opened.session_id, FINAL)

    assert summary(opened) == {(topic, 0): (0, 2, 2), (topic, 1): (0, 2, 0)}
    assert turns == [
        {(topic, 0): (0, 2, 2)},
        {(topic, 1): (0, 2, 2)},
        {(topic, 0): (0, 2, 2)},
    ]


def test_an_unknown_partition_stays_in_its_session_and_is_answered_each_time(
    broker: BrokerUnderTest,
) -> None:
    topic = ready_topic(broker, "session-unknown")
    missing = f"{topic}-missing"
    with WireConnection(broker.host, broker.port) as connection:
        opened = connection.call(
            FETCH, VERSION, fetch_request(0, INITIAL, {topic: {0: 0}, missing: {0: 0}})
        )
        answers = [
            connection.call(FETCH, VERSION, fetch_request(opened.session_id, epoch))
            for epoch in (1, 2)
        ]
        connection.call(FETCH, VERSION, fetch_request(opened.session_id, FINAL))

    assert opened.session_id != NO_SESSION
    unknown = (UNKNOWN_TOPIC_OR_PARTITION, -1, 0)
    assert summary(opened) == {(topic, 0): (0, 0, 0), (missing, 0): unknown}
    assert [summary(answer) for answer in answers] == [{(missing, 0): unknown}] * 2


# A full cache, on brokers started here with few slots


@pytest.fixture(scope="module", params=["kshim", "kafka"])
def small_cache(request: pytest.FixtureRequest) -> Iterator[BrokerUnderTest]:
    name: str = request.param
    if name not in selection().brokers:
        pytest.skip(f"{name} is not selected ({selection().brokers})")
    setting = {SLOTS_SETTING: str(SMALL_CACHE_SLOTS)}
    if name == "kshim":
        started = start_kshim((f"{SLOTS_SETTING}={SMALL_CACHE_SLOTS}",))
    else:
        reason = artifacts.unavailable_reason(REFERENCE_JARS)
        if reason is not None:
            pytest.skip(f"Kafka's jars are not available: {reason}")
        stack = contextlib.ExitStack()
        kafka = stack.enter_context(launched(jars_command(REFERENCE_JARS, setting)))
        started = BrokerUnderTest("kafka", kafka.bootstrap, stack)
    try:
        yield started
    finally:
        started.stop()


def test_a_full_cache_answers_without_a_session_until_one_is_closed(
    small_cache: BrokerUnderTest,
) -> None:
    """Recent consumer sessions are not evicted for another: the full fetch is answered
    whole, with session id 0. A follower's session may evict one of them (which one
    differs: Kafka evicts within one of its 8 shards). Once closed, their slots serve
    again."""
    topic = ready_topic(small_cache, "session-cache")
    produce(small_cache, topic, 0, 2)
    with WireConnection(small_cache.host, small_cache.port) as connection:

        def call(*args: Any, **options: Any) -> Any:
            return connection.call(FETCH, VERSION, fetch_request(*args, **options))

        opened = [call(NO_SESSION, INITIAL, {topic: {0: 0}}) for _ in range(SMALL_CACHE_SLOTS)]
        refused = [call(NO_SESSION, INITIAL, {topic: {0: 0}}) for _ in range(2)]
        follower = call(NO_SESSION, INITIAL, {topic: {0: 0}}, replica_id=FOLLOWER)
        after_follower = [int(call(answer.session_id, 1).error_code) for answer in opened]
        for answer in (*opened, follower):
            call(answer.session_id, FINAL)
        reopened = call(NO_SESSION, INITIAL, {topic: {0: 0}})
        call(reopened.session_id, FINAL)

    ids = {answer.session_id for answer in opened}
    assert len(ids) == SMALL_CACHE_SLOTS
    assert NO_SESSION not in ids
    assert [(answer.session_id, summary(answer)) for answer in refused] == [
        (NO_SESSION, {(topic, 0): (0, 2, 2)})
    ] * 2
    assert follower.session_id not in (NO_SESSION, *ids)
    assert sorted(after_follower) == [NONE] * (SMALL_CACHE_SLOTS - 1) + [FETCH_SESSION_ID_NOT_FOUND]
    assert reopened.session_id != NO_SESSION
