"""The fetch session cache (KIP-227) as a state machine: requests' session fields in, the
partitions to read and the answers to send out, under a fake clock (broker/fetch_sessions.py;
Kafka's FetchSessionTest covers the same ground)."""

from __future__ import annotations

import random

import pytest

from kshim.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INT_MAX,
    INVALID_SESSION_ID,
    MIN_EVICTION_MS,
    Answered,
    FetchContext,
    FetchSessionCache,
    next_epoch,
)
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import FetchedPartition
from kshim.protocol.messages.fetch import FetchPartition, FetchTopic, ForgottenTopic
from kshim.storage.interface import TopicPartition

TOPIC, OTHER = "orders", "payments"
A0, A1, B0 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1), TopicPartition(OTHER, 0)
NOT_FOUND = ErrorCode.fetch_session_id_not_found
BAD_EPOCH = ErrorCode.invalid_fetch_session_epoch
BATCH = b"\x00" * 70  # stands for a stored batch: only its length matters here


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now_ms


def cache(max_sessions: int = 10, clock: FakeClock | None = None) -> FetchSessionCache:
    return FetchSessionCache(max_sessions, clock or FakeClock(), ids=random.Random(7))


def topics(*partitions: tuple[TopicPartition, int]) -> list[FetchTopic]:
    """One FetchTopic per partition named with its fetch offset (the order kept)."""
    return [
        FetchTopic(
            topic=key.topic,
            partitions=[
                FetchPartition(partition=key.partition, fetch_offset=offset, partition_max_bytes=99)
            ],
        )
        for key, offset in partitions
    ]


def forgotten(*keys: TopicPartition) -> list[ForgottenTopic]:
    return [ForgottenTopic(topic=key.topic, partitions=[key.partition]) for key in keys]


def answer(
    key: TopicPartition,
    high_watermark: int = 10,
    records: bytes = b"",
    error: ErrorCode = ErrorCode.none,
    log_start_offset: int = 0,
    last_stable_offset: int | None = None,
) -> tuple[TopicPartition, FetchedPartition]:
    return key, FetchedPartition(
        partition_index=key.partition,
        error_code=error,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark if last_stable_offset is None else last_stable_offset,
        log_start_offset=log_start_offset,
        aborted_transactions=None,
        records=(records,) if records else (),
    )


def read_keys(context: FetchContext) -> list[TopicPartition]:
    return [key for key, _ in context.wanted]


def answered(context: FetchContext, answers: Answered) -> tuple[int, int, list[TopicPartition]]:
    sent = context.answer(answers)
    return sent.error_code, sent.session_id, [key for key, _ in sent.partitions]


def open_session(
    sessions: FetchSessionCache, *keys: TopicPartition, privileged: bool = False
) -> int:
    """A session of ``keys``, each told high watermark 10; returns its id."""
    context = sessions.begin(0, INITIAL_EPOCH, privileged, topics(*((key, 10) for key in keys)))
    session_id = context.answer([answer(key) for key in keys]).session_id
    assert session_id != INVALID_SESSION_ID
    return session_id


# Sessionless and full fetches


def test_a_sessionless_fetch_reads_and_answers_every_partition_and_keeps_nothing() -> None:
    sessions = cache()
    context = sessions.begin(0, FINAL_EPOCH, False, topics((A0, 3), (B0, 0)))

    assert read_keys(context) == [A0, B0]
    assert [partition.fetch_offset for _, partition in context.wanted] == [3, 0]
    assert answered(context, [answer(A0), answer(B0)]) == (0, INVALID_SESSION_ID, [A0, B0])
    assert len(sessions) == 0


def test_a_partition_named_twice_is_read_once_with_its_last_parameters() -> None:
    """Kafka's fetchData is a map: the later entry wins, in the first one's place; whether
    the topic is named twice or the partition twice under one topic."""
    twice_in_one_topic = [
        FetchTopic(
            topic=TOPIC,
            partitions=[
                FetchPartition(partition=0, fetch_offset=1),
                FetchPartition(partition=1, fetch_offset=0),
                FetchPartition(partition=0, fetch_offset=5),
            ],
        )
    ]
    sessions = cache()
    topic_twice = sessions.begin(0, FINAL_EPOCH, False, topics((A0, 1), (B0, 0), (A0, 5)))
    partition_twice = sessions.begin(0, INITIAL_EPOCH, False, twice_in_one_topic)

    assert [(key, partition.fetch_offset) for key, partition in topic_twice.wanted] == [
        (A0, 5),
        (B0, 0),
    ]
    assert [(key, partition.fetch_offset) for key, partition in partition_twice.wanted] == [
        (A0, 5),
        (A1, 0),
    ]
    session = sessions.session(partition_twice.answer([answer(A0), answer(A1)]).session_id)
    assert session is not None
    assert session.partitions[A0].wanted.fetch_offset == 5


def test_an_initial_fetch_opens_a_session_with_every_partition_answered() -> None:
    sessions = cache()
    context = sessions.begin(0, INITIAL_EPOCH, False, topics((A0, 3), (B0, 0)))
    error, session_id, sent = answered(context, [answer(A0, 7), answer(B0, 0)])

    assert (error, sent) == (0, [A0, B0])
    session = sessions.session(session_id)
    assert session is not None
    assert (session.epoch, list(session.partitions)) == (1, [A0, B0])
    cached = session.partitions[A0]
    assert (cached.wanted.fetch_offset, cached.high_watermark) == (3, 7)


def test_no_room_answers_the_full_fetch_without_a_session() -> None:
    sessions = cache(max_sessions=0)
    context = sessions.begin(0, INITIAL_EPOCH, False, topics((A0, 0)))

    assert answered(context, [answer(A0)]) == (0, INVALID_SESSION_ID, [A0])
    assert len(sessions) == 0


def test_a_full_fetch_naming_a_session_closes_it() -> None:
    sessions = cache()
    first = open_session(sessions, A0)

    reopened = sessions.begin(first, INITIAL_EPOCH, False, topics((B0, 0)))
    _, second, _ = answered(reopened, [answer(B0)])
    closing = sessions.begin(second, FINAL_EPOCH, False, topics((A0, 0)))

    assert second not in (first, INVALID_SESSION_ID)
    assert answered(closing, [answer(A0)]) == (0, INVALID_SESSION_ID, [A0])
    assert len(sessions) == 0


# Incremental fetches


def test_an_incremental_fetch_reads_the_whole_session_and_answers_what_changed() -> None:
    sessions = cache()
    session_id = open_session(sessions, A0, A1, B0)

    context = sessions.begin(session_id, 1, False, [])
    answers = [answer(A0), answer(A1, high_watermark=12), answer(B0, records=BATCH)]

    assert read_keys(context) == [A0, A1, B0]
    assert answered(context, answers) == (0, session_id, [A1, B0])
    again = sessions.begin(session_id, 2, False, [])
    # The high watermark told is remembered; B0's records are sent again while its fetch
    # offset stays (the broker never moves it: the fetcher names the partition when it does).
    assert answered(again, [answer(A0), answer(A1, 12), answer(B0, records=BATCH)])[2] == [B0]


def test_a_partition_that_returned_records_is_read_last_next_time() -> None:
    """Kafka rotates it, so a small max_bytes reaches the other partitions in turn."""
    sessions = cache()
    session_id = open_session(sessions, A0, A1, B0)

    context = sessions.begin(session_id, 1, False, [])
    context.answer([answer(A0, records=BATCH), answer(A1), answer(B0)])

    assert read_keys(sessions.begin(session_id, 2, False, [])) == [A1, B0, A0]


def test_log_start_and_last_stable_offsets_that_moved_are_answered() -> None:
    sessions = cache()
    session_id = open_session(sessions, A0, A1)
    context = sessions.begin(session_id, 1, False, [])
    moved = [answer(A0, log_start_offset=4), answer(A1, last_stable_offset=8)]

    assert answered(context, moved)[2] == [A0, A1]
    still = sessions.begin(session_id, 2, False, [])
    assert answered(still, moved)[2] == []


def test_an_error_is_answered_every_time_and_its_partition_once_more_after() -> None:
    """Kafka resets the high watermark told, so the recovered partition is sent again."""
    sessions = cache()
    session_id = open_session(sessions, A0)
    failing = answer(A0, error=ErrorCode.offset_out_of_range)

    for epoch in (1, 2):
        assert answered(sessions.begin(session_id, epoch, False, []), [failing])[2] == [A0]
    assert answered(sessions.begin(session_id, 3, False, []), [answer(A0)])[2] == [A0]
    assert answered(sessions.begin(session_id, 4, False, []), [answer(A0)])[2] == []


def test_an_incremental_fetch_adds_updates_and_forgets_partitions() -> None:
    sessions = cache()
    session_id = open_session(sessions, A0, A1)

    context = sessions.begin(session_id, 1, False, topics((A1, 20), (B0, 0)), forgotten(A0))

    assert [(key, partition.fetch_offset) for key, partition in context.wanted] == [
        (A1, 20),
        (B0, 0),
    ]
    # A new partition has told nothing yet: it is answered whatever it holds.
    assert answered(context, [answer(A1), answer(B0)])[2] == [B0]


def test_forgetting_every_partition_closes_the_session_and_answers_sessionless() -> None:
    sessions = cache()
    session_id = open_session(sessions, A0)

    context = sessions.begin(session_id, 1, False, [], forgotten(A0, B0))

    assert read_keys(context) == []
    assert answered(context, []) == (0, INVALID_SESSION_ID, [])
    assert sessions.session(session_id) is None


def test_an_unknown_session_id_is_fetch_session_id_not_found() -> None:
    sessions = cache()
    open_session(sessions, A0)

    for session_id, epoch in ((12345, 1), (INVALID_SESSION_ID, 5)):
        context = sessions.begin(session_id, epoch, False, topics((A0, 0)))
        assert (context.error_code, read_keys(context)) == (NOT_FOUND, [])
        assert answered(context, [answer(A0)]) == (NOT_FOUND, INVALID_SESSION_ID, [])


def test_a_wrong_epoch_is_refused_and_leaves_the_session_as_it_was() -> None:
    sessions = cache()
    session_id = open_session(sessions, A0)

    for epoch in (2, 0 - 2, INT_MAX):
        context = sessions.begin(session_id, epoch, False, topics((B0, 0)), forgotten(A0))
        assert answered(context, []) == (BAD_EPOCH, INVALID_SESSION_ID, [])

    assert read_keys(sessions.begin(session_id, 1, False, [])) == [A0]


def test_a_request_overtaken_by_the_next_of_its_session_answers_a_bad_epoch() -> None:
    """Kafka checks the epoch again when answering: a duplicate that long-polled meanwhile
    is refused (with the session's id), not answered from a stale view."""
    sessions = cache()
    session_id = open_session(sessions, A0)

    waiting = sessions.begin(session_id, 1, False, [])
    sessions.begin(session_id, 2, False, []).answer([answer(A0)])

    assert answered(waiting, [answer(A0, records=BATCH)]) == (BAD_EPOCH, session_id, [])


def test_a_request_whose_session_was_emptied_meanwhile_answers_nothing_of_it() -> None:
    """Emptying a session closes it without moving its epoch, so the epoch check lets the
    overtaken request through: the partitions forgotten are left out."""
    sessions = cache()
    session_id = open_session(sessions, A0)
    waiting = sessions.begin(session_id, 1, False, [])

    emptied = sessions.begin(session_id, 2, False, [], forgotten(A0))

    assert answered(emptied, []) == (0, INVALID_SESSION_ID, [])
    assert answered(waiting, [answer(A0, records=BATCH)]) == (0, session_id, [])


def test_epochs_wrap_to_1_and_final_stays_final() -> None:
    assert [next_epoch(epoch) for epoch in (0, 1, INT_MAX, FINAL_EPOCH, -7)] == [1, 2, 1, -1, -1]


# Eviction (FetchSessionCacheShard.tryEvict)


def test_a_full_cache_of_recent_sessions_refuses_a_new_consumer_session() -> None:
    sessions = cache(max_sessions=2)
    kept = [open_session(sessions, A0), open_session(sessions, A0, A1, B0)]

    context = sessions.begin(0, INITIAL_EPOCH, False, topics((A0, 0), (A1, 0), (B0, 0)))

    assert answered(context, [answer(A0), answer(A1), answer(B0)])[1] == INVALID_SESSION_ID
    assert [sessions.session(session_id) is not None for session_id in kept] == [True, True]


def test_the_least_recently_used_session_goes_once_stale() -> None:
    clock = FakeClock()
    sessions = cache(max_sessions=2, clock=clock)
    first, second = open_session(sessions, A0), open_session(sessions, A0)
    clock.now_ms += 100_000
    sessions.begin(first, 1, False, []).answer([answer(A0)])  # used again: second is older
    clock.now_ms += MIN_EVICTION_MS - 100_000 + 1

    newcomer = open_session(sessions, B0)

    assert sessions.session(second) is None
    assert sessions.session(first) is not None
    assert sessions.session(newcomer) is not None


def test_a_follower_evicts_the_smallest_consumer_session() -> None:
    sessions = cache(max_sessions=3)
    small = open_session(sessions, A0)
    large = open_session(sessions, A0, A1)
    follower = open_session(sessions, A0, privileged=True)

    open_session(sessions, B0, privileged=True)

    assert sessions.session(small) is None
    assert [sessions.session(kept) is not None for kept in (large, follower)] == [True, True]
    # No consumer session left to evict, and the followers' are recent: no room.
    context = sessions.begin(0, INITIAL_EPOCH, True, topics((B0, 0)))
    assert answered(context, [answer(B0)])[1] != INVALID_SESSION_ID  # large goes
    assert sessions.session(large) is None
    refused = sessions.begin(0, INITIAL_EPOCH, True, topics((B0, 0)))
    assert answered(refused, [answer(B0)])[1] == INVALID_SESSION_ID


def test_an_old_session_may_give_way_to_a_larger_one() -> None:
    """A session used more than 120 s after its creation is evictable by any newcomer
    with more partitions (by a follower's too), never by one with fewer."""
    clock = FakeClock()
    sessions = cache(max_sessions=1, clock=clock)
    old = open_session(sessions, A0, A1)
    clock.now_ms += MIN_EVICTION_MS + 1
    sessions.begin(old, 1, False, []).answer([answer(A0), answer(A1)])  # touched: evictable

    smaller = sessions.begin(0, INITIAL_EPOCH, False, topics((B0, 0)))
    assert answered(smaller, [answer(B0)])[1] == INVALID_SESSION_ID
    same_size = sessions.begin(0, INITIAL_EPOCH, False, topics((A0, 0), (B0, 0)))
    assert answered(same_size, [answer(A0), answer(B0)])[1] == INVALID_SESSION_ID
    larger = open_session(sessions, A0, A1, B0)

    assert sessions.session(old) is None
    assert sessions.session(larger) is not None


def test_a_session_never_touched_after_its_creation_is_not_evictable_by_size() -> None:
    """Evictability is decided when a session is used (Kafka's touch): one created and
    left alone waits to be stale."""
    clock = FakeClock()
    sessions = cache(max_sessions=1, clock=clock)
    idle = open_session(sessions, A0)
    clock.now_ms += MIN_EVICTION_MS  # not stale yet: unused for exactly 120 s

    larger = sessions.begin(0, INITIAL_EPOCH, False, topics((A0, 0), (B0, 0)))
    assert answered(larger, [answer(A0), answer(B0)])[1] == INVALID_SESSION_ID
    clock.now_ms += 1
    assert open_session(sessions, B0) != INVALID_SESSION_ID
    assert sessions.session(idle) is None


@pytest.mark.parametrize("privileged", [False, True])
def test_session_ids_are_positive_and_unique(privileged: bool) -> None:
    sessions = cache(max_sessions=500)
    ids = {open_session(sessions, A0, privileged=privileged) for _ in range(500)}

    assert len(ids) == 500
    assert min(ids) > 0
    assert max(ids) < INT_MAX
    assert sessions.partitions_cached == 500
