"""Bad input on the wire: broken frames, refused APIs, corrupt batches, pipelining, fuzzing.

kshim follows Kafka's rule (docs/protocol-notes.md §3-§4): a frame that
breaks the framing, a header that does not parse, or an API version the broker
does not serve closes the connection without an answer; anything wrong inside
a well-formed request is an error code in the response, per partition. Every
test ends with a normal kafka-python client producing and consuming (assign
and seek, no groups) and with the data written before the bad input unchanged.

The brokers are this module's own rather than ``shared_broker``, so that the
last tests can read their logs knowing every line came from inputs sent here.
"""

from __future__ import annotations

import random
import struct
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from kshim.client.frames import (
    decode_response,
    encode_body,
    encode_request,
    request_header,
    with_size,
)
from kshim.client.wire import ConnectionClosedError, connect
from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, serves
from kshim.protocol.framing import FRAME_SIZE
from kshim.protocol.headers import CORRELATION_ID
from kshim.protocol.records import BatchSpec
from kshim.testing import BrokerProcess, failure_lines, fetch_fields
from tests.bad_input_support import (
    API_VERSIONS,
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    CORRUPT_MESSAGE,
    CRC_OFFSET,
    DEFAULT_MAX_FRAME,
    DEFAULT_MAX_MESSAGE,
    FETCH,
    INVALID_RECORD,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LIMITED_MAX_FRAME,
    LIMITED_MAX_MESSAGE,
    MAGIC_OFFSET,
    MEMORY_SLACK_BYTES,
    MESSAGE_TOO_LARGE,
    METADATA,
    NONE,
    PARTITIONS,
    PRODUCE,
    PROMPT_S,
    RECORDS_COUNT_OFFSET,
    TRANSACTIONAL_FLAG,
    UNKNOWN_TOPIC_OR_PARTITION,
    WAIT_S,
    Baseline,
    answers_api_versions,
    api_versions_fallback,
    assert_closed_without_answer,
    assert_healthy,
    batch_of_size,
    crash_report,
    flip_last_byte,
    make_baseline,
    make_batch,
    patched,
    produce,
    produce_fields,
    resident_bytes,
)

# --- brokers -------------------------------------------------------------------------


# Process id each module broker started with; a different one at the end means it died
# and was restarted (the fuzz tests restart a dead broker so that they can go on).
FIRST_PIDS: dict[int, int] = {}


def _module_broker(tmp_path: Path, settings: Sequence[str] = ()) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", settings).start()
    assert broker.process is not None
    FIRST_PIDS[broker.port] = broker.process.pid
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with default settings, shared by this module's tests."""
    yield from _module_broker(tmp_path_factory.mktemp("bad-input"))


@pytest.fixture(scope="module")
def limited_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with small frame and batch limits, to test both boundaries exactly."""
    settings = [
        f"socket.request.max.bytes={LIMITED_MAX_FRAME}",
        f"message.max.bytes={LIMITED_MAX_MESSAGE}",
    ]
    yield from _module_broker(tmp_path_factory.mktemp("bad-input-limited"), settings)


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of its own for fuzzing, which may create or delete random topics."""
    yield from _module_broker(tmp_path_factory.mktemp("bad-input-fuzz"))


@pytest.fixture
def baseline(broker: BrokerProcess) -> Baseline:
    return make_baseline(broker)


# --- garbage and broken framing ---------------------------------------------------------

RANDOM_GARBAGE = random.Random(20240611).randbytes(256)
GARBAGE = {
    "random bytes": RANDOM_GARBAGE,
    "HTTP request line": b"GET / HTTP/1.1\r\nHost: localhost:9092\r\n\r\n",
    "TLS ClientHello": bytes.fromhex("160301020001") + bytes(32),
    "all 0xff": b"\xff" * 64,
    "all zeros": bytes(64),
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_bytes_close_the_connection(
    broker: BrokerProcess, baseline: Baseline, garbage: bytes
) -> None:
    # Each starts with a size prefix outside [10, socket.request.max.bytes].
    (size,) = FRAME_SIZE.unpack_from(garbage)
    assert not 10 <= size <= DEFAULT_MAX_FRAME
    with connect(broker.bootstrap) as conn:
        conn.send(garbage)
        assert_closed_without_answer(conn)
    assert_healthy(broker, baseline)


@pytest.mark.parametrize("claimed_size", [100, DEFAULT_MAX_FRAME])
def test_partial_frame_then_half_close(
    broker: BrokerProcess, baseline: Baseline, claimed_size: int
) -> None:
    rss_before = resident_bytes(broker)
    partial = encode_request(API_VERSIONS, 0, 1, {})[FRAME_SIZE.size :]
    with connect(broker.bootstrap) as stalled, connect(broker.bootstrap) as other:
        stalled.send(FRAME_SIZE.pack(claimed_size) + partial)
        # The broker waits for the rest of the frame: no answer, no close ...
        with pytest.raises(TimeoutError):
            stalled.read_exactly(1, timeout_s=0.2)
        # ... while other connections are served.
        assert other.call(API_VERSIONS, 0).error_code == NONE
        stalled.half_close()
        assert_closed_without_answer(stalled)
        assert other.call(API_VERSIONS, 0).error_code == NONE
    assert resident_bytes(broker) - rss_before < MEMORY_SLACK_BYTES
    assert_healthy(broker, baseline)


@pytest.mark.parametrize("how", ["close", "reset"])
def test_partial_frame_then_disconnect(broker: BrokerProcess, baseline: Baseline, how: str) -> None:
    partial = encode_request(API_VERSIONS, 0, 1, {})
    with connect(broker.bootstrap) as other:
        stalled = connect(broker.bootstrap)
        stalled.send(FRAME_SIZE.pack(1000) + partial[FRAME_SIZE.size :])
        if how == "close":
            stalled.close()
        else:
            stalled.reset()
        assert other.call(API_VERSIONS, 0).error_code == NONE
    assert_healthy(broker, baseline)


@pytest.mark.parametrize(
    "size", [2**31 - 1, DEFAULT_MAX_FRAME + 1, -1, -(2**31)], ids=["max-int", "max+1", "-1", "min"]
)
def test_out_of_range_size_prefix_closes_promptly(
    broker: BrokerProcess, baseline: Baseline, size: int
) -> None:
    rss_before = resident_bytes(broker)
    with connect(broker.bootstrap) as conn:
        conn.send(FRAME_SIZE.pack(size) + bytes(64))
        assert assert_closed_without_answer(conn) < PROMPT_S
    assert resident_bytes(broker) - rss_before < MEMORY_SLACK_BYTES
    assert_healthy(broker, baseline)


SHORT_FRAMES = {
    "size 0": b"",
    "size 4: key and version": struct.pack(">hh", API_VERSIONS, 0),
    "size 8: no client id length": struct.pack(">hhi", API_VERSIONS, 0, 1),
    "size 9": struct.pack(">hhib", API_VERSIONS, 0, 1, 0),
    "client id past the end": struct.pack(">hhih", API_VERSIONS, 0, 1, 20),
    "header v2 without tagged fields": struct.pack(">hhih", METADATA, 12, 1, -1),
}


@pytest.mark.parametrize("body", SHORT_FRAMES.values(), ids=SHORT_FRAMES.keys())
def test_frame_shorter_than_request_header_closes(
    broker: BrokerProcess, baseline: Baseline, body: bytes
) -> None:
    with connect(broker.bootstrap) as conn:
        conn.send(with_size(body))
        assert_closed_without_answer(conn)
    assert_healthy(broker, baseline)


def test_smallest_request_is_answered(broker: BrokerProcess) -> None:
    # ApiVersions v0 with a null client id: exactly the 10-byte minimum.
    with connect(broker.bootstrap) as conn:
        conn.send(with_size(struct.pack(">hhih", API_VERSIONS, 0, 77, -1)))
        assert conn.read_response(API_VERSIONS, 0, 77).error_code == NONE


# --- APIs and versions the broker does not serve ------------------------------------------

UNSERVED = {
    "unknown key 9999": request_header(9999, 0, 5, flexible=False),
    "negative key": request_header(-1, 0, 5, flexible=False),
    "Produce v99": request_header(PRODUCE, 99, 5, flexible=True) + bytes(16),
    # kio has no Produce v0-2 or Fetch v0-3 (Kafka 4 dropped them): bodies spelled out.
    "Produce v2": request_header(PRODUCE, 2, 5, flexible=False) + struct.pack(">hii", 1, 1000, 0),
    "Fetch v1": request_header(FETCH, 1, 5, flexible=False) + struct.pack(">iiii", -1, 100, 1, 0),
    "Fetch v13": request_header(FETCH, 13, 5, flexible=True)
    + encode_body(FETCH, 13, {"replica_id": -1, "max_wait": 100, "topics": []}),
    "Metadata v13": request_header(METADATA, 13, 5, flexible=True)
    + encode_body(METADATA, 13, {"topics": []}),
}


@pytest.mark.parametrize("body", UNSERVED.values(), ids=UNSERVED.keys())
def test_unserved_api_or_version_closes(
    broker: BrokerProcess, baseline: Baseline, body: bytes
) -> None:
    with connect(broker.bootstrap) as conn:
        assert conn.call(API_VERSIONS, 0).error_code == NONE
        # A valid request pipelined behind the bad one is never answered either.
        conn.send(with_size(body) + encode_request(API_VERSIONS, 0, 6, {}))
        assert_closed_without_answer(conn)
    assert_healthy(broker, baseline)


FALLBACK_BODIES = {
    "v3-shaped body": encode_body(
        API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1.0"}
    ),
    "unparseable body": b"\xff" * 7,
}


@pytest.mark.parametrize("body", FALLBACK_BODIES.values(), ids=FALLBACK_BODIES.keys())
@pytest.mark.parametrize("version", [5, 99, 32767])
def test_api_versions_above_4_gets_the_kip511_fallback(
    broker: BrokerProcess, baseline: Baseline, version: int, body: bytes
) -> None:
    with connect(broker.bootstrap) as conn:
        conn.send(with_size(request_header(API_VERSIONS, version, 41, flexible=True) + body))
        frame = conn.read_exactly(20)
        assert frame == api_versions_fallback(41), frame.hex()
        # The client retries on the same connection, as Java and kafka-python do
        # (docs/protocol-notes.md §3.2).
        for retry_version in (0, 3):
            fields = {"client_software_name": "raw", "client_software_version": "1.0"}
            response = conn.call(API_VERSIONS, retry_version, fields)
            assert response.error_code == NONE
            ranges = {(a.api_key, a.min_version, a.max_version) for a in response.api_keys}
            assert {(API_VERSIONS, 0, 4), (PRODUCE, 0, 11), (FETCH, 4, 12)} <= ranges
    assert_healthy(broker, baseline)


# --- Produce with batches that must be refused --------------------------------------------

TWO_VALUES = [b"raw-0", b"raw-1"]
GOOD = make_batch(TWO_VALUES)


BAD_BATCHES: dict[str, tuple[Callable[[], bytes], int]] = {
    "bad CRC (value byte flipped)": (lambda: flip_last_byte(GOOD), CORRUPT_MESSAGE),
    "bad CRC (CRC field)": (lambda: patched(GOOD, CRC_OFFSET, ">I", 0xDEADBEEF), CORRUPT_MESSAGE),
    "truncated batch": (lambda: GOOD[:-5], CORRUPT_MESSAGE),
    "shorter than the header": (lambda: GOOD[: BATCH_HEADER_SIZE - 1], CORRUPT_MESSAGE),
    "magic 1": (lambda: patched(GOOD, MAGIC_OFFSET, ">b", 1), CORRUPT_MESSAGE),
    "magic 3": (lambda: patched(GOOD, MAGIC_OFFSET, ">b", 3), CORRUPT_MESSAGE),
    "length field too long": (
        lambda: patched(GOOD, LENGTH_OFFSET, ">i", len(GOOD) - 12 + 1),
        CORRUPT_MESSAGE,
    ),
    "length field too short": (
        lambda: patched(GOOD, LENGTH_OFFSET, ">i", len(GOOD) - 12 - 1),
        CORRUPT_MESSAGE,
    ),
    "two batches": (lambda: GOOD + make_batch([b"second"]), INVALID_RECORD),
    "control batch": (
        lambda: make_batch(TWO_VALUES, BatchSpec(attributes=CONTROL_FLAG)),
        INVALID_RECORD,
    ),
    "transaction marker": (
        lambda: make_batch(
            [b"marker"],
            BatchSpec(
                attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG,
                producer_id=9,
                producer_epoch=0,
                base_sequence=0,
            ),
        ),
        INVALID_RECORD,
    ),
    "records count above last offset delta + 1": (
        lambda: patched(GOOD, RECORDS_COUNT_OFFSET, ">i", 3, fix_crc=True),
        INVALID_RECORD,
    ),
    "last offset delta inconsistent": (
        lambda: patched(GOOD, LAST_OFFSET_DELTA_OFFSET, ">i", 0, fix_crc=True),
        INVALID_RECORD,
    ),
    "producer id without sequence": (
        lambda: make_batch(TWO_VALUES, BatchSpec(producer_id=7, producer_epoch=0)),
        INVALID_RECORD,
    ),
    "empty records": (lambda: b"", INVALID_RECORD),
    "over message.max.bytes": (
        lambda: make_batch([bytes(DEFAULT_MAX_MESSAGE)]),
        MESSAGE_TOO_LARGE,
    ),
}


@pytest.mark.parametrize("case", BAD_BATCHES.values(), ids=BAD_BATCHES.keys())
def test_produce_refuses_bad_batch(
    broker: BrokerProcess, baseline: Baseline, case: tuple[Callable[[], bytes], int]
) -> None:
    make, expected_error = case
    target = (baseline.topic, 1)
    assert produce(broker.bootstrap, {target: make()}) == {target: (expected_error, -1)}
    assert_healthy(broker, baseline)


@pytest.mark.parametrize("version", [3, 8, 11])  # v9 above; v8 and below are not flexible
def test_produce_refuses_bad_crc_at_each_version(
    broker: BrokerProcess, baseline: Baseline, version: int
) -> None:
    target = (baseline.topic, 0)
    request = {target: flip_last_byte(GOOD), (baseline.topic, 1): GOOD}
    assert produce(broker.bootstrap, request, version) == {
        target: (CORRUPT_MESSAGE, -1),
        (baseline.topic, 1): (NONE, 2),
    }
    baseline.expected[1] += [(2, b"raw", b"raw-0"), (3, b"raw", b"raw-1")]
    assert_healthy(broker, baseline)


def test_produce_batch_over_topic_max_message_bytes(broker: BrokerProcess) -> None:
    baseline = make_baseline(broker, {"max.message.bytes": "2000"})
    (at_limit, value), (over_limit, _) = batch_of_size(2000), batch_of_size(2001)
    target = (baseline.topic, 1)
    assert produce(broker.bootstrap, {target: over_limit}) == {target: (MESSAGE_TOO_LARGE, -1)}
    assert produce(broker.bootstrap, {target: at_limit}) == {target: (NONE, 2)}
    baseline.expected[1].append((2, b"raw", value))
    assert_healthy(broker, baseline)


def test_produce_mixes_good_and_bad_partitions(broker: BrokerProcess, baseline: Baseline) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    request = {
        (baseline.topic, 0): GOOD,
        (baseline.topic, 1): flip_last_byte(GOOD),
        (baseline.topic, 7): GOOD,
        (missing, 0): GOOD,
    }
    assert produce(broker.bootstrap, request) == {
        (baseline.topic, 0): (NONE, 3),
        (baseline.topic, 1): (CORRUPT_MESSAGE, -1),
        (baseline.topic, 7): (UNKNOWN_TOPIC_OR_PARTITION, -1),
        (missing, 0): (UNKNOWN_TOPIC_OR_PARTITION, -1),
    }
    baseline.expected[0] += [(3, b"raw", b"raw-0"), (4, b"raw", b"raw-1")]
    assert_healthy(broker, baseline)


def test_acks_zero_bad_batch_gets_no_response(broker: BrokerProcess, baseline: Baseline) -> None:
    bad = produce_fields({(baseline.topic, 0): flip_last_byte(GOOD)}, acks=0)
    good = produce_fields({(baseline.topic, 1): GOOD}, acks=0)
    with connect(broker.bootstrap) as conn:
        conn.send(
            encode_request(PRODUCE, 9, 10, bad)
            + encode_request(API_VERSIONS, 0, 11, {})
            + encode_request(PRODUCE, 9, 12, good)
            + encode_request(API_VERSIONS, 0, 13, {})
        )
        # Only the ApiVersions requests are answered, in order; the connection stays usable.
        assert conn.read_response(API_VERSIONS, 0, 11).error_code == NONE
        assert conn.read_response(API_VERSIONS, 0, 13).error_code == NONE
        assert conn.call(API_VERSIONS, 0).error_code == NONE
    baseline.expected[1] += [(2, b"raw", b"raw-0"), (3, b"raw", b"raw-1")]
    assert_healthy(broker, baseline)


def _undecodable_bodies(topic: str) -> dict[str, bytes]:
    fields = produce_fields({(topic, 0): GOOD})
    v9 = request_header(PRODUCE, 9, 3, flexible=True) + encode_body(PRODUCE, 9, fields)
    v8 = request_header(PRODUCE, 8, 3, flexible=False) + encode_body(PRODUCE, 8, fields)
    return {
        "Produce v9 truncated": v9[:-3],
        "Produce v9 cut inside the batch": v9[: len(v9) - len(GOOD) // 2],
        "Produce v8 truncated": v8[:-3],
        "Produce v8 topic count past the end": request_header(PRODUCE, 8, 3, flexible=False)
        + struct.pack(">hhii", -1, 1, 5000, 1000),
    }


@pytest.mark.parametrize("case", list(_undecodable_bodies("any-topic")))
def test_undecodable_request_body_closes(
    broker: BrokerProcess, baseline: Baseline, case: str
) -> None:
    body = _undecodable_bodies(baseline.topic)[case]
    with connect(broker.bootstrap) as conn:
        conn.send(with_size(body))
        assert_closed_without_answer(conn)
    assert_healthy(broker, baseline)


def test_trailing_bytes_after_a_whole_body_are_ignored(
    broker: BrokerProcess, baseline: Baseline
) -> None:
    # Kafka ignores them, and librdkafka's all-topics Metadata request carries three
    # (confluentinc/librdkafka#5049), so they must not close the connection.
    metadata = {"topics": [{"name": baseline.topic}], "allow_auto_topic_creation": False}
    body = encode_body(METADATA, 12, metadata) + b"\x00\x01\x02"
    with connect(broker.bootstrap) as conn:
        conn.send(with_size(request_header(METADATA, 12, 8, flexible=True) + body))
        response = conn.read_response(METADATA, 12, 8)
        assert [(t.name, t.error_code) for t in response.topics] == [(baseline.topic, NONE)]
        assert conn.call(API_VERSIONS, 0).error_code == NONE
    assert_healthy(broker, baseline)


# Null (length -1, or compact length 0) where the schema does not allow null: Kafka's
# generated readers refuse it as a broken request and close the connection.
NULL_ARRAYS = {
    "Produce v9 topic_data": request_header(PRODUCE, 9, 3, flexible=True)
    + bytes.fromhex("00 ffff 00001388 00 00"),  # null transactional id, acks, timeout
    "Produce v9 partition_data": request_header(PRODUCE, 9, 3, flexible=True)
    + bytes.fromhex("00 ffff 00001388 02 0261 00 00 00"),  # one topic "a"
    "Produce v8 partition_data": request_header(PRODUCE, 8, 3, flexible=False)
    + bytes.fromhex("ffff ffff 00001388 00000001 000161 ffffffff"),
    "Fetch v12 topics": request_header(FETCH, 12, 3, flexible=True)
    + bytes.fromhex("ffffffff 00000064 00000001 00100000 00 00000000 ffffffff 00 01 01 00"),
}


@pytest.mark.parametrize("body", NULL_ARRAYS.values(), ids=NULL_ARRAYS.keys())
def test_null_for_a_non_nullable_array_closes(fresh_broker: BrokerProcess, body: bytes) -> None:
    # Own broker, so that its log holds only this request: a broken frame is refused by
    # the decoder (an INFO line), not by a handler failing on None (an ERROR traceback).
    baseline = make_baseline(fresh_broker)
    with connect(fresh_broker.bootstrap) as conn:
        conn.send(with_size(body) + encode_request(API_VERSIONS, 0, 4, {}))
        assert_closed_without_answer(conn)
    log = fresh_broker.log_text()
    assert not failure_lines(log), crash_report(fresh_broker)
    assert_healthy(fresh_broker, baseline)


HUGE_COUNTS = {
    # Flexible versions: a compact array's length is an unsigned varint holding count + 1.
    "Metadata v12 topics, varint 2**32-1": request_header(METADATA, 12, 3, flexible=True)
    + bytes.fromhex("ffffffff0f"),
    "Produce v9 topics, varint 2**35-1": request_header(PRODUCE, 9, 3, flexible=True)
    + bytes.fromhex("00 ffff 00001388 ffffffff7f"),  # null transactional id, acks, timeout
    "ListOffsets v7 topics, varint 2**32": request_header(2, 7, 3, flexible=True)
    + bytes.fromhex("ffffffff 00 8080808010"),  # replica id, isolation level
    # Older versions: an int32 count. (Refused here only while the kernel overcommits:
    # see the report on kio's preallocation.)
    "Metadata v1 topics, int32 2**31-1": request_header(METADATA, 1, 3, flexible=False)
    + struct.pack(">i", 2**31 - 1),
}


@pytest.mark.parametrize("body", HUGE_COUNTS.values(), ids=HUGE_COUNTS.keys())
def test_array_count_beyond_the_frame_closes(fresh_broker: BrokerProcess, body: bytes) -> None:
    # A count no frame of this size can hold must be refused before anything is allocated
    # for it (Kafka checks the count against the bytes remaining). Own broker: a crash here
    # must not take the module's broker down with it.
    baseline = make_baseline(fresh_broker)
    rss_before = resident_bytes(fresh_broker)
    with connect(fresh_broker.bootstrap) as conn:
        conn.send(with_size(body))
        assert_closed_without_answer(conn)
    assert answers_api_versions(fresh_broker.bootstrap), crash_report(fresh_broker)
    assert resident_bytes(fresh_broker) - rss_before < MEMORY_SLACK_BYTES
    assert_healthy(fresh_broker, baseline)


# --- pipelining and disconnects ------------------------------------------------------------


def test_pipelined_requests_answered_in_order(broker: BrokerProcess, baseline: Baseline) -> None:
    topic = baseline.topic
    metadata = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    requests: list[tuple[int, int, dict[str, Any]]] = [
        (API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1.0"}),
        (METADATA, 12, metadata),
        (FETCH, 12, fetch_fields(topic, 0, 3, max_wait_ms=300)),  # at the end: long-polls
        (METADATA, 12, metadata),
        (PRODUCE, 9, produce_fields({(topic, 1): GOOD})),
        (API_VERSIONS, 0, {}),
    ]
    ids = [100 + index for index in range(len(requests))]
    with connect(broker.bootstrap) as conn:
        start = time.monotonic()
        pipelined = zip(requests, ids, strict=True)
        conn.send(b"".join(encode_request(k, v, cid, f) for (k, v, f), cid in pipelined))
        responses, arrivals = [], []
        for (api_key, version, _), correlation_id in zip(requests, ids, strict=True):
            responses.append(conn.read_response(api_key, version, correlation_id))
            arrivals.append(time.monotonic() - start)
    fetched = responses[2].responses[0].partitions[0]
    assert (fetched.error_code, fetched.high_watermark, bytes(fetched.records or b"")) == (
        NONE,
        3,
        b"",
    )
    # The long poll ran its course, and everything behind it waited (correlation ids above).
    assert arrivals[2] >= 0.25
    for described in (responses[1], responses[3]):
        assert [(t.name, t.error_code, len(t.partitions)) for t in described.topics] == [
            (topic, NONE, PARTITIONS)
        ]
    produced = responses[4].responses[0].partition_responses[0]
    assert (produced.index, produced.error_code, produced.base_offset) == (1, NONE, 2)
    baseline.expected[1] += [(2, b"raw", b"raw-0"), (3, b"raw", b"raw-1")]
    assert_healthy(broker, baseline)


def test_many_pipelined_requests_keep_order(broker: BrokerProcess, baseline: Baseline) -> None:
    # More requests than the broker keeps in flight, all written before reading anything.
    software = {"client_software_name": "raw", "client_software_version": "1.0"}
    kinds: list[tuple[int, int, dict[str, Any]]] = [
        (API_VERSIONS, 0, {}),
        (METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}),
        (API_VERSIONS, 3, software),
    ]
    requests = [kinds[index % len(kinds)] for index in range(150)]
    with connect(broker.bootstrap) as conn:
        conn.send(
            b"".join(encode_request(k, v, 1000 + i, f) for i, (k, v, f) in enumerate(requests))
        )
        for index, (api_key, version, _) in enumerate(requests):
            response = conn.read_response(api_key, version, 1000 + index)
            if api_key == METADATA:
                assert response.topics == ()
            else:
                assert response.error_code == NONE
    assert_healthy(broker, baseline)


@pytest.mark.parametrize("how", ["close", "reset", "half-close"])
def test_disconnect_with_long_poll_in_flight(
    broker: BrokerProcess, baseline: Baseline, how: str
) -> None:
    conn = connect(broker.bootstrap)
    conn.send(encode_request(FETCH, 12, 1, fetch_fields(baseline.topic, 0, 3, max_wait_ms=300)))
    if how == "half-close":
        conn.half_close()
        # The broker closes in turn, having sent nothing or the whole answer in flight.
        sent = conn.wait_closed(PROMPT_S)
        conn.close()
        if sent:
            (size,) = FRAME_SIZE.unpack_from(sent)
            assert len(sent) == FRAME_SIZE.size + size
            _, response = decode_response(FETCH, 12, sent[FRAME_SIZE.size :])
            assert response.responses[0].partitions[0].error_code == NONE
    elif how == "close":
        conn.close()
    else:
        conn.reset()
    time.sleep(0.4)  # let the long poll expire and its answer meet the closed socket
    assert_healthy(broker, baseline)


# --- configured limits --------------------------------------------------------------------


def test_frame_at_socket_request_max_bytes(limited_broker: BrokerProcess) -> None:
    baseline = make_baseline(limited_broker)
    header_size = len(request_header(API_VERSIONS, 0, 1, flexible=False, client_id=""))
    client_id = "c" * (LIMITED_MAX_FRAME - header_size)
    at_limit = request_header(API_VERSIONS, 0, 1, flexible=False, client_id=client_id)
    assert len(at_limit) == LIMITED_MAX_FRAME
    with connect(limited_broker.bootstrap) as conn:
        conn.send(with_size(at_limit))
        assert conn.read_response(API_VERSIONS, 0, 1).error_code == NONE
        conn.send(FRAME_SIZE.pack(LIMITED_MAX_FRAME + 1))  # refused before the body arrives
        assert assert_closed_without_answer(conn) < PROMPT_S
    assert_healthy(limited_broker, baseline)


def test_broker_message_max_bytes(limited_broker: BrokerProcess) -> None:
    # One batch per request: two would not fit in socket.request.max.bytes=4096.
    baseline = make_baseline(limited_broker)
    overridden = make_baseline(limited_broker, {"max.message.bytes": "3000"})
    at_limit, at_limit_value = batch_of_size(LIMITED_MAX_MESSAGE)
    over_limit, over_limit_value = batch_of_size(LIMITED_MAX_MESSAGE + 1)
    cases = [
        ((baseline.topic, 0), over_limit, (MESSAGE_TOO_LARGE, -1)),
        ((baseline.topic, 1), at_limit, (NONE, 2)),
        ((overridden.topic, 1), over_limit, (NONE, 2)),  # the topic's override wins
    ]
    for target, batch, outcome in cases:
        assert produce(limited_broker.bootstrap, {target: batch}) == {target: outcome}
    baseline.expected[1].append((2, b"raw", at_limit_value))
    overridden.expected[1].append((2, b"raw", over_limit_value))
    assert_healthy(limited_broker, baseline)
    assert_healthy(limited_broker, overridden)


# --- fuzzing -----------------------------------------------------------------------------

SENTINEL_ID = 0x5EED
SERVED = sorted(
    (api_key, version)
    for api_key, (low, high) in ADVERTISED.items()
    for version in range(low, high + 1)
    if serves(api_key, version)
)
# No shrinking: an input that kills the broker is reported as generated (with its bytes
# in hex) instead of after dozens of broker restarts.
FUZZ_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
)


def fuzz_one(broker: BrokerProcess, frame_body: bytes) -> Any:
    """Sends one fuzzed frame; returns the answer to it, or None (closed, or no answer due).

    The frame is followed by a valid ApiVersions (the sentinel), so a broker that
    neither answers nor closes (a hang) fails at the read deadline. The broker must
    still be serving new connections afterwards.
    """
    if not broker.is_running():
        broker.start()  # an earlier example killed it; its own failure was reported
    fuzz_id = CORRELATION_ID.unpack_from(frame_body, 4)[0] if len(frame_body) >= 8 else None
    answer = None
    with connect(broker.bootstrap, WAIT_S) as conn:
        conn.send(with_size(frame_body) + encode_request(API_VERSIONS, 0, SENTINEL_ID, {}))
        for _ in range(2):  # at most the fuzzed frame's answer, then the sentinel's
            try:
                frame = conn.read_frame()
            except ConnectionClosedError:
                break
            (correlation_id,) = CORRELATION_ID.unpack_from(frame)
            if correlation_id == SENTINEL_ID and answer is None and fuzz_id != SENTINEL_ID:
                break
            assert correlation_id in (fuzz_id, SENTINEL_ID)
            answer = answer or frame
    assert answers_api_versions(broker.bootstrap), (
        f"the broker stopped serving after frame {frame_body.hex()}:\n{crash_report(broker)}"
    )
    return answer


def test_fuzz_random_frame_bodies(fuzz_broker: BrokerProcess) -> None:
    baseline = make_baseline(fuzz_broker)

    @FUZZ_SETTINGS
    @given(body=st.binary(max_size=300))
    def check(body: bytes) -> None:
        fuzz_one(fuzz_broker, body)

    check()
    assert_healthy(fuzz_broker, baseline)


def test_fuzz_bodies_of_served_requests(fuzz_broker: BrokerProcess) -> None:
    baseline = make_baseline(fuzz_broker)

    @FUZZ_SETTINGS
    @given(
        api=st.sampled_from(SERVED),
        correlation_id=st.integers(-(2**31), 2**31 - 1),
        body=st.binary(max_size=200),
    )
    def check(api: tuple[int, int], correlation_id: int, body: bytes) -> None:
        flexible = codec.is_flexible(*api)
        fuzz_one(fuzz_broker, request_header(*api, correlation_id, flexible=flexible) + body)

    check()
    assert_healthy(fuzz_broker, baseline)


def test_fuzz_mutated_produce(fuzz_broker: BrokerProcess) -> None:
    baseline = make_baseline(fuzz_broker)
    target = make_baseline(fuzz_broker)
    header = request_header(PRODUCE, 9, 1, flexible=True)
    body = encode_body(PRODUCE, 9, produce_fields({(target.topic, 0): GOOD}))
    refusals = {NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_RECORD}

    @FUZZ_SETTINGS
    @given(
        changes=st.lists(
            st.tuples(st.integers(0, len(body) - 1), st.integers(0, 255)), min_size=1, max_size=4
        )
    )
    def check(changes: list[tuple[int, int]]) -> None:
        mutated = bytearray(body)
        for position, value in changes:
            mutated[position] = value
        answer = fuzz_one(fuzz_broker, header + bytes(mutated))
        if answer is None:
            return  # closed, or acks mutated to 0
        _, response = decode_response(PRODUCE, 9, answer)
        for topic in response.responses:
            for partition in topic.partition_responses:
                assert partition.error_code in refusals
                assert (partition.error_code == NONE) == (partition.base_offset >= 0)

    check()
    assert_healthy(fuzz_broker, baseline)


# --- after everything ------------------------------------------------------------------


def test_brokers_still_running(
    broker: BrokerProcess, limited_broker: BrokerProcess, fuzz_broker: BrokerProcess
) -> None:
    for process in (broker, limited_broker, fuzz_broker):
        assert process.is_running(), crash_report(process)
        assert answers_api_versions(process.bootstrap)


def test_no_internal_errors_logged(
    broker: BrokerProcess, limited_broker: BrokerProcess, fuzz_broker: BrokerProcess
) -> None:
    # Bad input is refused on purpose (an INFO line), never by a crash; one start per broker.
    for process in (broker, limited_broker, fuzz_broker):
        log = process.log_text()
        assert process.process is not None
        assert process.process.pid == FIRST_PIDS[process.port], "restarted after a crash"
        assert not failure_lines(log), crash_report(process)
