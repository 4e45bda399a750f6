"""Conformance cases for Fetch beyond its ordinary answer: a read refused as out of range,
and incremental fetch sessions (KIP-227), opened and then fetched from.

A session's id is drawn at random by each broker; the differential test numbers it
(compat_tests/conformance_diff.py), and the cases here check that it is not 0. Sessions
need Fetch v7+, so these cases run from ``FIRST_SESSION_VERSION`` on (``FIRST_VERSIONS``).
"""

from __future__ import annotations

from typing import Any

from compat_tests.conformance_probe import Exchange, Probe, as_stored

RECORDS = 3
OFFSET_OUT_OF_RANGE = 1
NO_OFFSET = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
NO_SESSION, INITIAL_EPOCH, FINAL_EPOCH = 0, 0, -1
FIRST_SESSION_VERSION = 7  # Fetch v7 added SessionId and SessionEpoch (KIP-227)
FETCH = 1


def fetch_request(
    topics: list[str],
    session_id: int = NO_SESSION,
    epoch: int = FINAL_EPOCH,
    offset: int = 0,
    isolation_level: int = READ_UNCOMMITTED,
) -> dict[str, Any]:
    """A Fetch of partition 0 of each of ``topics`` from ``offset``, answered at once."""
    partition = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": isolation_level,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": topic, "partitions": [partition]} for topic in topics],
        "forgotten_topics_data": [],
    }


def answered(
    topic: str, high_watermark: int, records: bytes = b"", error_code: int = 0
) -> dict[str, Any]:
    """One topic's answer for partition 0, read uncommitted (aborted list null)."""
    partition = {
        "partition_index": 0,
        "error_code": error_code,
        "high_watermark": high_watermark,
        "last_stable_offset": high_watermark,
        "log_start_offset": 0 if high_watermark >= 0 else NO_OFFSET,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }
    return {"topic": topic, "partitions": [partition]}


def fetch_out_of_range(probe: Probe, version: int) -> Exchange:
    return _fetch_out_of_range(probe, READ_UNCOMMITTED)


def fetch_out_of_range_read_committed(probe: Probe, version: int) -> Exchange:
    return _fetch_out_of_range(probe, READ_COMMITTED)


def _fetch_out_of_range(probe: Probe, isolation_level: int) -> Exchange:
    """Kafka's ReplicaManager answers a failed read with no offsets (-1) and a null
    aborted list, whatever the isolation level."""
    topic = probe.create_topic("fetch-range")
    probe.produce(topic, RECORDS)
    request = fetch_request([topic], offset=100, isolation_level=isolation_level)
    refused = answered(topic, NO_OFFSET, error_code=OFFSET_OUT_OF_RANGE)
    expected = {"throttle_time": 0, "error_code": 0, "session_id": NO_SESSION}
    return Exchange(request, lambda _: {**expected, "responses": [refused]})


def _with_session(expected: dict[str, Any]) -> Any:
    """``expect`` for an answer that carries a new session's id, whatever it is."""

    def expect(actual: Any) -> dict[str, Any]:
        assert actual.session_id != NO_SESSION, "no session opened"
        return {**expected, "session_id": actual.session_id}

    return expect


def fetch_session_opened(probe: Probe, version: int) -> Exchange:
    """A full fetch that opens a session (id 0, epoch 0): every partition is answered,
    with the new session's id."""
    topic = probe.create_topic("session-open")
    batch = probe.produce(topic, RECORDS)
    request = fetch_request([topic], NO_SESSION, INITIAL_EPOCH)
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "responses": [answered(topic, RECORDS, as_stored(batch, 0))],
    }
    return Exchange(request, _with_session(expected))


def fetch_session_incremental(probe: Probe, version: int) -> Exchange:
    """The session's next fetch (epoch 1) names no partition: only the one that has
    records since is answered, the other left out."""
    quiet, written = probe.create_topic("session-quiet"), probe.create_topic("session-new")
    opened = probe.call(FETCH, version, fetch_request([quiet, written], NO_SESSION, INITIAL_EPOCH))
    assert opened.error_code == 0 and opened.session_id != NO_SESSION, opened
    batch = probe.produce(written, RECORDS)
    request = fetch_request([], opened.session_id, INITIAL_EPOCH + 1)
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": opened.session_id,
        "responses": [answered(written, RECORDS, as_stored(batch, 0))],
    }
    return Exchange(request, lambda _: expected)


FETCH_CASES = {
    "fetch-out-of-range": (FETCH, fetch_out_of_range),
    "fetch-out-of-range-read-committed": (FETCH, fetch_out_of_range_read_committed),
    "fetch-session-opened": (FETCH, fetch_session_opened),
    "fetch-session-incremental": (FETCH, fetch_session_incremental),
}
# The first version a case may be sent at, where it is later than the API's first.
FIRST_VERSIONS = {
    "fetch-session-opened": FIRST_SESSION_VERSION,
    "fetch-session-incremental": FIRST_SESSION_VERSION,
}
