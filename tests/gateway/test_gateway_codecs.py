"""The gateway's sans-io parts: where frames start, which answer a request gets, and how
answers naming brokers are rewritten (kshim/gateway/)."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from kshim.client.frames import decode_response, encode_request, with_size
from kshim.gateway import requests
from kshim.gateway.addresses import GatewayPorts, Topology, UnmappableBroker
from kshim.gateway.answers import AnswerRewriter
from kshim.gateway.splitter import Held, Piece, Splitter, Verdict
from kshim.protocol import codec
from kshim.protocol.framing import FrameError
from kshim.protocol.headers import encode_response_header

PORTS = GatewayPorts("gw.example", 19092, 19100)


def _joined(pieces: list[Piece]) -> tuple[bytes, list[bytes]]:
    passed = b"".join(bytes(piece) for piece in pieces if not isinstance(piece, Held))
    return passed, [piece.payload for piece in pieces if isinstance(piece, Held)]


@pytest.mark.parametrize("seed", range(5))
def test_frames_pass_as_they_come_or_are_held_whole_whatever_the_chunking(seed: int) -> None:
    rng = random.Random(seed)
    frames = [bytes([kind]) * size for kind, size in [(1, 5), (2, 3000), (1, 70), (2, 9), (1, 1)]]
    stream = b"".join(with_size(frame) for frame in frames)
    seen: list[int] = []

    def decide(head: bytes | memoryview, size: int) -> Verdict:
        seen.append(size)
        return Verdict.HOLD if head[0] == 2 else Verdict.PASS

    splitter = Splitter(decide, 1, 10_000)
    pieces: list[Piece] = []
    position = 0
    while position < len(stream):
        step = rng.randint(1, 700)
        pieces += splitter.feed(stream[position : position + step])
        position += step
    passed, held = _joined(pieces)
    assert held == [frames[1], frames[3]]
    assert passed == b"".join(with_size(frame) for frame in frames if frame[0] == 1)
    assert seen == [len(frame) for frame in frames]  # decided once per frame


def test_a_large_passed_frame_is_forwarded_in_pieces_not_gathered() -> None:
    splitter = Splitter(lambda head, size: Verdict.PASS, 1, 1 << 30)
    frame = with_size(b"x" * 1_000_000)
    first = splitter.feed(frame[:65536])
    rest = splitter.feed(frame[65536:])
    passed, held = _joined(first)
    assert len(passed) == 65536 and not held  # handed on before the end came
    assert passed + _joined(rest)[0] == frame


def test_more_gathers_the_whole_frame_then_asks_again() -> None:
    calls: list[int] = []

    def decide(head: bytes | memoryview, size: int) -> Verdict:
        calls.append(len(head))
        return Verdict.MORE if len(head) < size else Verdict.PASS

    frame = with_size(b"y" * 500)
    pieces = Splitter(decide, 1, 1000).feed(frame)
    assert calls == [256, 500]
    assert _joined(pieces) == (frame, [])


def test_a_size_outside_the_bounds_is_a_frame_error() -> None:
    with pytest.raises(FrameError):
        Splitter(lambda head, size: Verdict.PASS, 10, 100).feed(with_size(b"z" * 101))
    with pytest.raises(FrameError):
        Splitter(lambda head, size: Verdict.PASS, 10, 100).feed(b"\xff\xff\xff\xff")


def _produce(version: int, acks: int, transactional_id: str | None = None) -> bytes:
    body = {"transactional_id": transactional_id, "acks": acks}
    return encode_request(0, version, 7, {**body, "topic_data": []}, client_id="c" * 90)[4:]


@pytest.mark.parametrize("version", [3, 8, 9, 11])
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_a_produce_with_acks_0_expects_no_answer(version: int, acks: int) -> None:
    payload = _produce(version, acks, "tx" if version >= 3 else None)
    expected = None if acks == 0 else requests.Pending(0, version, 7)
    assert requests.read(payload) == expected
    with pytest.raises(requests.NeedMore):  # the long client id: acks lies past 64 bytes
        requests.read(payload[:64])
    assert requests.read(memoryview(payload)) == expected


def test_any_other_request_is_read_from_its_fixed_header() -> None:
    payload = encode_request(3, 12, 41, {"topics": None})[4:]
    assert requests.read(payload[:10]) == requests.Pending(3, 12, 41)


def _rewriter() -> tuple[AnswerRewriter, Topology, list[int]]:
    seen: list[int] = []
    topology = Topology()
    return AnswerRewriter(PORTS, topology, seen.append), topology, seen


def _answer(api_key: int, version: int, body: Mapping[str, object]) -> bytes:
    flexible = codec.is_flexible(api_key, version) and api_key != 18
    return encode_response_header(5, flexible) + codec.encode_response(api_key, version, body)


BROKERS = [{"node_id": 1, "host": "k1", "port": 9092}, {"node_id": 3, "host": "k3", "port": 9093}]


@pytest.mark.parametrize("version", [1, 9, 12, 13])
def test_metadata_names_the_gateway_ports_and_teaches_the_topology(version: int) -> None:
    rewriter, topology, seen = _rewriter()
    body = {"brokers": BROKERS, "controller_id": 1, "topics": []}
    rewritten = rewriter.rewrite(3, version, _answer(3, version, body))
    correlation_id, answer = decode_response(3, version, rewritten)
    assert correlation_id == 5
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [
        (1, "gw.example", 19101),
        (3, "gw.example", 19103),
    ]
    assert topology.brokers == {1: ("k1", 9092), 3: ("k3", 9093)}
    assert seen == [1, 3]
    rewriter.rewrite(3, version, _answer(3, version, body))
    assert seen == [1, 3]  # told once per broker


def test_find_coordinator_and_describe_cluster_name_the_gateway() -> None:
    rewriter, _, _ = _rewriter()
    old = {"error_code": 0, "node_id": 3, "host": "k3", "port": 9093}
    _, answer = decode_response(10, 3, rewriter.rewrite(10, 3, _answer(10, 3, old)))
    assert (answer.host, answer.port) == ("gw.example", 19103)
    new = {"coordinators": [{"key": "g", "error_code": 0, "node_id": 1, "host": "k1", "port": 1}]}
    _, answer = decode_response(10, 4, rewriter.rewrite(10, 4, _answer(10, 4, new)))
    assert (answer.coordinators[0].host, answer.coordinators[0].port) == ("gw.example", 19101)
    cluster = {
        "cluster_id": "c",
        "controller_id": 1,
        "brokers": [{"broker_id": 3, "host": "k3", "port": 2}],
    }
    _, answer = decode_response(60, 0, rewriter.rewrite(60, 0, _answer(60, 0, cluster)))
    assert (answer.brokers[0].host, answer.brokers[0].port) == ("gw.example", 19103)


def test_a_coordinator_not_available_is_left_as_it_is() -> None:
    rewriter, topology, _ = _rewriter()
    none = {"error_code": 15, "node_id": -1, "host": "", "port": -1}
    _, answer = decode_response(10, 3, rewriter.rewrite(10, 3, _answer(10, 3, none)))
    assert (answer.node_id, answer.port) == (-1, -1)
    assert topology.brokers == {}


def test_api_versions_offers_only_what_the_gateway_can_relay() -> None:
    rewriter, _, _ = _rewriter()
    keys = [(0, 0, 11), (1, 4, 17), (3, 0, 13), (18, 0, 4), (55, 0, 2), (78, 1, 1), (19, 0, 7)]
    body = {"error_code": 0, "api_keys": [
        {"api_key": key, "min_version": low, "max_version": high} for key, low, high in keys
    ]}  # fmt: skip
    _, answer = decode_response(18, 3, rewriter.rewrite(18, 3, _answer(18, 3, body)))
    offered = {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}
    assert offered == {0: (0, 9), 1: (4, 15), 3: (0, 13), 18: (0, 4), 55: (0, 1), 19: (0, 7)}


def test_a_node_id_without_a_gateway_port_is_refused() -> None:
    with pytest.raises(UnmappableBroker):
        PORTS.port_of(70_000)
    with pytest.raises(UnmappableBroker):
        GatewayPorts("h", 19092, 19090).port_of(2)  # the bootstrap port itself
