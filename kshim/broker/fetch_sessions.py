"""Incremental fetch sessions (KIP-227), kept as Kafka's FetchSessionCache keeps them.

https://cwiki.apache.org/confluence/display/KAFKA/KIP-227%3A+Introduce+Incremental+FetchRequests+to+Increase+Partition+Scalability

Sans-io: requests' fields in, what to read and what to answer out, time from an injected
clock (milliseconds) and session ids from an injected random source. The Fetch handler
(api/records/fetch.py) drives it; nothing here reads a log, decodes a record or waits. One
cache per broker process, in memory: after a restart no session is known, and a client's
next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND and opens a new one, as after a
Kafka restart.

A request's session_id and session_epoch (Fetch v7+; v4-v6 carry neither and are
sessionless) select its context, as Kafka's FetchManager.newContext does:

    session_id  session_epoch  context       answered
    0           -1 (FINAL)     sessionless   every partition, session id 0
    0           0 (INITIAL)    full          every partition, a new session's id (0 when
                                             the cache has no room)
    S           -1 or 0        S is closed, then as with session id 0
    S           other E        incremental   S's partitions that changed or failed, id S;
                                             FETCH_SESSION_ID_NOT_FOUND for an unknown S,
                                             INVALID_FETCH_SESSION_EPOCH when E is not S's
                                             next epoch (no partitions, session id 0)

An incremental request names only the partitions it adds or whose parameters changed
(fetch offset, max bytes, ...) and, in forgotten_topics_data, those it drops; the session
keeps every partition's last parameters, and what it last answered (high watermark, log
start offset) so that unchanged partitions are left out of the answer. A session left with
no partition is closed, and that request answered sessionless. Kafka's session error
FETCH_SESSION_TOPIC_ID_ERROR needs Fetch v13 (topic ids), which kshim does not serve.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions (1000). When it is
full, a new session may evict (FetchSessionCacheShard.tryEvict) the least recently used
session when it is stale, unused for more than 120 s; otherwise the least valuable
evictable session, ordered by (privileged, partitions, id), if the newcomer is worth more
in that order. Sessions of followers (replica id >= 0) are privileged. A session becomes
evictable when used (touched) more than 120 s after its creation; an unprivileged session
is at once evictable by a privileged newcomer. Kafka 3.8 and later split the slots among
eight shards, each evicting on its own, to spare the JVM lock contention; a Python event
loop has none, so the cache here is one whole (KIP-227's design).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import FetchedPartition
from kshim.protocol.messages.fetch import FetchPartition, FetchTopic, ForgottenTopic
from kshim.storage.interface import TopicPartition

INVALID_SESSION_ID = 0  # no session: what a sessionless or refused request is answered
INITIAL_EPOCH = 0  # open a session (after closing the one named, if any)
FINAL_EPOCH = -1  # close the session named, if any, and open none
MIN_EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
INT_MAX = (1 << 31) - 1
NO_OFFSET = -1  # Kafka's INVALID_HIGH_WATERMARK: nothing answered yet

Wanted = list[tuple[TopicPartition, FetchPartition]]
Answered = list[tuple[TopicPartition, FetchedPartition]]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (FetchMetadata.nextEpoch): FINAL stays FINAL, and the
    epoch wraps past int32's maximum to 1, never back to INITIAL."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT_MAX else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """A session's partition: the fetcher's last parameters, and what it was last told."""

    wanted: FetchPartition  # fetch offset, partition max bytes, epochs, as last named
    high_watermark: int = NO_OFFSET
    log_start_offset: int = NO_OFFSET
    last_stable_offset: int = NO_OFFSET

    def must_answer(self, answer: FetchedPartition, with_records: bool) -> bool:
        """Whether an incremental answer includes this partition (Kafka's
        CachedPartition.maybeUpdateResponseData): it has records (``with_records``), an
        error, or offsets the fetcher has not been told; records those offsets as told."""
        changed = with_records or answer.error_code != ErrorCode.none
        if self.high_watermark != answer.high_watermark:
            changed = True
            self.high_watermark = answer.high_watermark
        if self.log_start_offset != answer.log_start_offset:
            changed = True
            self.log_start_offset = answer.log_start_offset
        # Not in Kafka's test, where the last stable offset never moves without the high
        # watermark (a transaction ends with a marker appended); a read_committed consumer
        # must still see it move, however kshim's transactions end.
        if self.last_stable_offset != answer.last_stable_offset:
            changed = True
            self.last_stable_offset = answer.last_stable_offset
        if answer.error_code != ErrorCode.none:
            # Sent again once the error is gone, whatever the offsets are then.
            self.high_watermark = NO_OFFSET
        return changed


def has_records(answer: FetchedPartition) -> bool:
    return any(map(len, answer.records))  # stops at the first chunk that is not empty


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[TopicPartition, CachedPartition]  # in the order they are read
    created_ms: int
    last_used_ms: int
    epoch: int  # the epoch its next request must carry
    # Partitions at the last touch, and evictability decided then (Kafka's touch).
    cached_size: int = 0
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)


class SessionAnswer(NamedTuple):
    """What a request is answered: its top-level error and session id, and the partitions
    it includes, in order."""

    error_code: ErrorCode
    session_id: int
    partitions: Answered


class FetchContext:
    """One request's session context: the partitions to read (``wanted``, in order), and
    ``answer``, which turns every read partition's answer into what is sent (and updates
    the session). A session error (``error_code``) reads and answers no partition. This
    base is the sessionless context."""

    __slots__ = ("error_code", "wanted")

    def __init__(self, wanted: Wanted, error_code: ErrorCode = ErrorCode.none) -> None:
        self.wanted = wanted
        self.error_code = error_code

    def answer(self, answers: Answered) -> SessionAnswer:
        return SessionAnswer(self.error_code, INVALID_SESSION_ID, answers)


class _SessionError(FetchContext):
    __slots__ = ()

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__([], error_code)

    def answer(self, answers: Answered) -> SessionAnswer:
        # The request's partitions are unknown (Kafka's SessionErrorContext): none is sent.
        return SessionAnswer(self.error_code, INVALID_SESSION_ID, [])


class _Full(FetchContext):
    """A full fetch that opens a session with every partition answered."""

    __slots__ = ("_cache", "_privileged")

    def __init__(self, cache: FetchSessionCache, wanted: Wanted, privileged: bool) -> None:
        super().__init__(wanted)
        self._cache = cache
        self._privileged = privileged

    def answer(self, answers: Answered) -> SessionAnswer:
        def partitions() -> dict[TopicPartition, CachedPartition]:
            named = dict(self.wanted)
            return {
                topic_partition: CachedPartition(
                    named[topic_partition],
                    answer.high_watermark,
                    answer.log_start_offset,
                    answer.last_stable_offset,
                )
                for topic_partition, answer in answers
            }

        session_id = self._cache.create(self._privileged, len(answers), partitions)
        return SessionAnswer(ErrorCode.none, session_id, answers)


class _Incremental(FetchContext):
    __slots__ = ("_epoch", "_session")

    def __init__(self, session: FetchSession) -> None:
        super().__init__([(key, cached.wanted) for key, cached in session.partitions.items()])
        self._session = session
        self._epoch = session.epoch  # what the session's epoch must still be when answering

    def answer(self, answers: Answered) -> SessionAnswer:
        session = self._session
        if session.epoch != self._epoch:
            # Another request of the session came meanwhile (a duplicate, or a retry
            # after a timeout): this one's view of the session is stale.
            return SessionAnswer(ErrorCode.invalid_fetch_session_epoch, session.id, [])
        partitions = session.partitions
        included = []
        for topic_partition, answer in answers:
            cached = partitions.get(topic_partition)
            if cached is None:
                # Forgotten meanwhile by a request that emptied, and so closed, the session
                # without a next epoch (Kafka's FetchManager.newContext then throws here).
                continue
            with_records = has_records(answer)
            if cached.must_answer(answer, with_records):
                included.append((topic_partition, answer))
                if with_records and next(reversed(partitions)) is not topic_partition:
                    # Kafka moves a partition that returned data to the end of the session,
                    # so the next responses' byte budget reaches the others first. (The
                    # answers carry the session's own keys, so identity tells the last one;
                    # an equal copy would only move the last partition to the end again.)
                    del partitions[topic_partition]
                    partitions[topic_partition] = cached
        return SessionAnswer(ErrorCode.none, session.id, included)


class FetchSessionCache:
    """The broker's fetch sessions; not thread-safe (the event loop's alone)."""

    def __init__(
        self,
        max_sessions: int,
        clock: Callable[[], int],
        eviction_ms: int = MIN_EVICTION_MS,
        ids: random.Random | None = None,
    ) -> None:
        self._max_sessions = max_sessions
        self._clock = clock
        self._eviction_ms = eviction_ms
        self._ids = ids if ids is not None else random.Random()
        # By session id, least recently used first: a touch moves a session to the end.
        self._sessions: dict[int, FetchSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def session(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def partitions_cached(self) -> int:
        return sum(session.cached_size for session in self._sessions.values())

    def begin(
        self,
        session_id: int,
        epoch: int,
        privileged: bool,
        topics: Sequence[FetchTopic],
        forgotten: Sequence[ForgottenTopic] = (),
    ) -> FetchContext:
        """The context of a request with these fields (Kafka's FetchManager.newContext);
        closes, updates and touches sessions as the request asks. ``privileged``: the
        request is a follower's."""
        wanted = _named(topics)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(wanted)
            return _Full(self, wanted, privileged)
        session = self._sessions.get(session_id)
        if session is None:
            return _SessionError(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return _SessionError(ErrorCode.invalid_fetch_session_epoch)
        _update(session, wanted, _forgotten(forgotten) if forgotten else ())
        if not session.partitions:
            self.remove(session_id)
            return FetchContext(wanted)
        self._touch(session, self._clock())
        session.epoch = next_epoch(session.epoch)
        return _Incremental(session)

    def create(
        self,
        privileged: bool,
        size: int,
        partitions: Callable[[], dict[TopicPartition, CachedPartition]],
    ) -> int:
        """A new session's id, with the ``size`` partitions ``partitions`` makes, or
        INVALID_SESSION_ID when the cache is full and nothing may be evicted
        (FetchSessionCacheShard.maybeCreateSession)."""
        now = self._clock()
        if len(self._sessions) >= self._max_sessions and not self._evict(privileged, size, now):
            return INVALID_SESSION_ID
        session = FetchSession(
            self._new_id(), privileged, partitions(), now, now, next_epoch(INITIAL_EPOCH)
        )
        self._sessions[session.id] = session
        self._touch(session, now)
        return session.id

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def _evict(self, privileged: bool, size: int, now: int) -> bool:
        """Evicts one session to make room for a new one, if any may go
        (FetchSessionCacheShard.tryEvict)."""
        if not self._sessions:
            return False
        least_recent = next(iter(self._sessions.values()))
        if now - least_recent.last_used_ms > self._eviction_ms:
            self.remove(least_recent.id)
            return True
        # Only when full with nothing stale: a scan of at most the cache's size.
        evictable = [
            session
            for session in self._sessions.values()
            if (session.evictable_by_privileged if privileged else session.evictable_by_all)
        ]
        if not evictable:
            return False
        cheapest = min(evictable, key=FetchSession.evictable_key)
        if (privileged, size, 0) < cheapest.evictable_key():
            return False
        self.remove(cheapest.id)
        return True

    def _touch(self, session: FetchSession, now: int) -> None:
        """Marks ``session`` used at ``now`` (FetchSessionCacheShard.touch)."""
        del self._sessions[session.id]
        self._sessions[session.id] = session
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        old = now - session.created_ms > self._eviction_ms
        session.evictable_by_privileged = old or not session.privileged
        session.evictable_by_all = old

    def _new_id(self) -> int:
        """A positive id no session has (FetchSessionCacheShard.newSessionId)."""
        while True:
            session_id = self._ids.randrange(1, INT_MAX)
            if session_id not in self._sessions:
                return session_id


def _named(topics: Sequence[FetchTopic]) -> Wanted:
    """The partitions a request names, in order. Kafka's FetchRequest.fetchData is a map:
    a partition named twice keeps its first place and its last parameters. Checked on
    plain names and numbers, so that requests naming each partition once (all of them, in
    practice) pay for no hashing of partition keys."""
    wanted = [
        (TopicPartition(topic.topic, partition.partition), partition)
        for topic in topics
        for partition in topic.partitions
    ]
    if len(wanted) > 1 and _names_twice(topics):
        return list(dict(wanted).items())
    return wanted


def _names_twice(topics: Sequence[FetchTopic]) -> bool:
    if len({topic.topic for topic in topics}) < len(topics):
        return True
    return any(
        len({partition.partition for partition in topic.partitions}) < len(topic.partitions)
        for topic in topics
    )


def _forgotten(forgotten: Iterable[ForgottenTopic]) -> list[TopicPartition]:
    return [
        TopicPartition(topic.topic, partition)
        for topic in forgotten
        for partition in topic.partitions
    ]


def _update(session: FetchSession, wanted: Wanted, forgotten: Iterable[TopicPartition]) -> None:
    """Adds the partitions named for the first time, takes the new parameters of the
    others, and drops the forgotten ones (FetchSession.update)."""
    partitions = session.partitions
    for topic_partition, partition in wanted:
        cached = partitions.get(topic_partition)
        if cached is None:
            partitions[topic_partition] = CachedPartition(partition)
        else:
            cached.wanted = partition
    for topic_partition in forgotten:
        partitions.pop(topic_partition, None)
