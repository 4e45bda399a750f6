"""The gateway's sans-io handling of a Produce naming a delay companion: telling one from
its topic names (requests.inspect), checking its batches by the broker's rules and taking
the refused ones out (delay_screen.DelayRules), and answering for them (merged_answer)."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kshim.broker.delay.naming import DELIVER_AT_HEADER
from kshim.broker.delay.requests import check_batch
from kshim.client.frames import decode_response, encode_request, with_size
from kshim.gateway import requests
from kshim.gateway.addresses import GatewayPorts, Topology
from kshim.gateway.answers import AnswerRewriter, UnreadableAnswer
from kshim.gateway.delay_screen import DelayRules, merged_answer
from kshim.gateway.relay import ClientSide, RelayCounts, UpstreamSide
from kshim.gateway.requests import Pending, Refusal
from kshim.gateway.splitter import PEEK_BYTES
from kshim.protocol import codec
from kshim.protocol.errors import ErrorCode
from kshim.protocol.headers import encode_response_header
from kshim.protocol.records import Header, Record, build_batch

NOW_MS = 1_800_000_000_000
MAX_DELAY_MS = 1_000_000
RULES = DelayRules(MAX_DELAY_MS, lambda: NOW_MS)


def _batch(*headers: Sequence[Header], key: bytes | None = None) -> bytes:
    records = [Record(i, NOW_MS, key, b"v%d" % i, tuple(h)) for i, h in enumerate(headers)]
    return build_batch(records)


VALID = _batch([(DELIVER_AT_HEADER, str(NOW_MS + 5).encode())])
NO_DUE = _batch([(DELIVER_AT_HEADER, str(NOW_MS + 5).encode())], [])
TOO_FAR = _batch([(DELIVER_AT_HEADER, str(NOW_MS + MAX_DELAY_MS + 1).encode())])


def _produce(version: int, topics: Mapping[str, Mapping[int, bytes]], acks: int = -1) -> bytes:
    """A Produce request's payload (no size) from {topic: {partition: batch}}."""
    topic_data = [
        {"name": name, "partition_data": [{"index": i, "records": b} for i, b in parts.items()]}
        for name, parts in topics.items()
    ]
    body = {"transactional_id": None, "acks": acks, "timeout": 1000, "topic_data": topic_data}
    return encode_request(0, version, 7, body)[4:]


@pytest.mark.parametrize("version", [3, 8, 9])
def test_a_one_topic_produce_is_told_from_its_first_bytes(version: int) -> None:
    big = _produce(version, {"orders": {0: _batch(*[[]] * 200)}})
    assert len(big) > 4 * PEEK_BYTES
    assert requests.inspect(big[:PEEK_BYTES]) == (requests.Pending(0, version, 7), False)
    payload = _produce(version, {"orders.delay": {0: VALID, 1: VALID}})
    assert requests.inspect(payload[:PEEK_BYTES]) == (requests.Pending(0, version, 7), True)


@pytest.mark.parametrize("version", [3, 9])
def test_a_later_topic_is_reached_past_the_earlier_ones_records(version: int) -> None:
    records = _batch(*[[]] * 100)
    payload = _produce(version, {"orders": {0: records, 1: records}, "orders.delay": {2: VALID}})
    with pytest.raises(requests.NeedMore):  # the second name lies past the first bytes
        requests.inspect(payload[:PEEK_BYTES])
    assert requests.inspect(memoryview(payload)) == (requests.Pending(0, version, 7), True)
    plain = _produce(version, {"orders": {0: records, 1: records}, "payments": {2: VALID}})
    assert requests.inspect(plain) == (requests.Pending(0, version, 7), False)


def test_only_a_delay_companion_counts_and_acks_0_still_does() -> None:
    # X.delay.delay is no companion (naming.reserved_for_delay), as on the broker.
    assert requests.inspect(_produce(9, {"x.delay.delay": {0: VALID}}))[1] is False
    assert requests.inspect(_produce(9, {"x.delay": {0: VALID}}, acks=0)) == (None, True)
    assert requests.inspect(encode_request(3, 12, 41, {"topics": None})[4:]) == (
        requests.Pending(3, 12, 41),
        False,
    )


@pytest.mark.parametrize("version", [3, 9])
def test_a_produce_whose_batches_are_all_valid_goes_upstream_as_it_came(version: int) -> None:
    payload = _produce(version, {"t.delay": {0: VALID, 1: VALID}, "plain": {0: NO_DUE}})
    screened = RULES.screen(payload)
    assert screened.payload is None and screened.refused == ()


@pytest.mark.parametrize("version", [3, 9])
def test_refused_batches_are_taken_out_with_the_brokers_reasons(version: int) -> None:
    payload = _produce(version, {"t.delay": {0: VALID, 1: NO_DUE, 2: TOO_FAR}, "p": {0: NO_DUE}})
    screened = RULES.screen(memoryview(payload))
    code = ErrorCode.invalid_record
    assert screened.refused == (
        Refusal("t.delay", 1, code, check_batch(memoryview(NO_DUE), NOW_MS, MAX_DELAY_MS) or ""),
        Refusal("t.delay", 2, code, check_batch(memoryview(TOO_FAR), NOW_MS, MAX_DELAY_MS) or ""),
    )
    assert "needs a kshim-deliver-at" in screened.refused[0].message
    assert "kshim.delay.max.ms=1000000" in screened.refused[1].message
    assert screened.payload is not None
    kept = _produce(version, {"t.delay": {0: VALID}, "p": {0: NO_DUE}})
    assert screened.payload == kept  # the header and every kept batch byte for byte


def test_a_request_left_with_no_partition_still_goes_upstream() -> None:
    screened = RULES.screen(_produce(9, {"t.delay": {0: NO_DUE}}))
    assert screened.payload == _produce(9, {})
    assert [refusal.partition for refusal in screened.refused] == [0]


def test_a_batch_the_broker_cannot_read_is_refused_as_it_refuses_it() -> None:
    corrupt = bytearray(VALID)
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    screened = RULES.screen(_produce(9, {"t.delay": {0: bytes(corrupt), 1: b""}}))
    assert [(r.partition, r.error_code) for r in screened.refused] == [
        (0, ErrorCode.corrupt_message),
        (1, ErrorCode.invalid_record),
    ]


def _answer(version: int, topics: Mapping[str, Sequence[int]]) -> bytes:
    body = {
        "responses": [
            {"name": name, "partition_responses": [
                {"index": i, "error_code": 0, "base_offset": 40 + i} for i in indexes
            ]}
            for name, indexes in topics.items()
        ],
        "throttle_time": 0,
    }  # fmt: skip
    flexible = codec.is_flexible(0, version)
    return encode_response_header(7, flexible) + codec.encode_response(0, version, body)


@pytest.mark.parametrize("version", [3, 8, 9])
def test_the_refusals_join_the_upstreams_answer(version: int) -> None:
    refused = [Refusal("t.delay", 1, 87, "why"), Refusal("u.delay", 0, 87, "also")]
    merged = merged_answer(version, _answer(version, {"t.delay": [0], "p": [3]}), refused)
    correlation_id, answer = decode_response(0, version, merged)
    assert correlation_id == 7
    seen = {
        (topic.name, part.index): (part.error_code, part.base_offset)
        for topic in answer.responses
        for part in topic.partition_responses
    }
    assert seen == {
        ("t.delay", 0): (0, 40),
        ("p", 3): (0, 43),
        ("t.delay", 1): (87, -1),
        ("u.delay", 0): (87, -1),
    }
    partitions = answer.responses[0].partition_responses
    messages = [getattr(part, "error_message", None) for part in partitions]
    assert messages == ([None, "why"] if version >= 8 else [None, None])  # v8+ carries one
    with pytest.raises(UnreadableAnswer):
        merged_answer(version, merged[:-3], refused)


class _Client(ClientSide):
    """A relay's client side with no connection, keeping what is written to it."""

    def __init__(self, rewriter: AnswerRewriter) -> None:
        super().__init__(_no_upstream, rewriter, lambda _: None, RelayCounts(), DelayRules())
        self.written = b""
        self.closed = False

    def write(self, pieces: list[bytes | memoryview]) -> None:
        self.written += b"".join(bytes(piece) for piece in pieces)

    def close(self) -> None:
        self.closed = True


async def _no_upstream(protocol: object) -> Any:
    raise OSError("not connected")


def test_answers_held_whole_in_one_read_are_each_rewritten_for_their_own_request() -> None:
    rewriter = AnswerRewriter(
        GatewayPorts("gw.example", 19092, 19100), Topology(), lambda node: None
    )
    client = _Client(rewriter)
    refused = (Refusal("t.delay", 1, 87, "why"),)
    pending = collections.deque([Pending(0, 9, 7, refused), Pending(18, 3, 8)])
    upstream = UpstreamSide(client, pending, rewriter, RelayCounts())
    versions = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 11}]}
    versions_answer = encode_response_header(8, False) + codec.encode_response(18, 3, versions)
    upstream.data_received(with_size(_answer(9, {"t.delay": [0]})) + with_size(versions_answer))
    assert not client.closed
    produce_size = int.from_bytes(client.written[:4])
    produce = client.written[4 : 4 + produce_size]
    _, answer = decode_response(0, 9, produce)
    assert [p.error_code for p in answer.responses[0].partition_responses] == [0, 87]
    _, offered = decode_response(18, 3, client.written[8 + produce_size :])
    assert offered.api_keys[0].max_version == 9  # capped, as answers.py caps Produce
