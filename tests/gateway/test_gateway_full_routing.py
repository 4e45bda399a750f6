"""The gateway's sans-io parts for ``T.full``: which requests it answers or prepares
(kshim/gateway/full/requests.py), how Metadata names the owning gateways
(full/metadata.py), and that its own answers keep their turn among the upstream's
(kshim/gateway/local_steps.py)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from kshim.client.frames import encode_request
from kshim.gateway import requests
from kshim.gateway.answers import encode_answer
from kshim.gateway.delay_screen import DelayRules
from kshim.gateway.full.metadata import views_in_metadata
from kshim.gateway.full.requests import Decoded, Route, route
from kshim.gateway.local_steps import LocalSteps, Step
from kshim.gateway.splitter import Piece
from kshim.protocol import codec

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3


def _fetch(version: int, topic: str) -> bytes:
    partitions = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]
    fields = {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20,
              "isolation_level": 1, "session_id": 0, "session_epoch": -1,
              "topics": [{"topic": topic, "partitions": partitions}],
              "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip
    return encode_request(FETCH, version, 7, fields)[4:]


def _metadata(version: int, topics: list[str] | None) -> bytes:
    named = None if topics is None else [{"name": name} for name in topics]
    fields = {"topics": named, "allow_auto_topic_creation": True}
    return encode_request(METADATA, version, 8, fields)[4:]


@pytest.mark.parametrize("version", [4, 11, 12])
def test_reads_of_a_view_are_answered_and_others_relayed(version: int) -> None:
    request = _fetch(version, "orders.full")
    assert route(request, len(request)).route is Route.ANSWER
    assert route(request[:30], len(request)).route is Route.MORE  # looked at whole
    for other in ("orders", "orders.full.full", "full"):
        plain = _fetch(version, other)
        assert route(plain, len(plain)).route is Route.RELAY
    offsets = encode_request(LIST_OFFSETS, 7, 9, {"replica_id": -1, "isolation_level": 1,
        "topics": [{"name": "orders.full", "partitions": [{"partition_index": 0,
        "current_leader_epoch": -1, "timestamp": -2}]}]})[4:]  # fmt: skip
    assert route(offsets, len(offsets)).route is Route.ANSWER


@pytest.mark.parametrize("version", [1, 8, 9, 12])
def test_metadata_naming_a_view_is_prepared_and_one_for_every_topic_flagged(version: int) -> None:
    named = _metadata(version, ["orders", "orders.full"])
    assert route(named, len(named)).route is Route.PREPARE
    plain = _metadata(version, ["orders"])
    assert route(plain, len(plain)).route is Route.RELAY
    assert not route(plain, len(plain)).lists_all
    every = _metadata(version, None)
    assert route(every, len(every)).route is Route.RELAY
    assert route(every, len(every)).lists_all


def test_a_produce_to_a_view_is_refused_as_the_broker_refuses_it() -> None:
    fields = {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [
        {"name": name, "partition_data": [{"index": 0, "records": b"x" * 70}]}
        for name in ("orders.full", "orders")]}  # fmt: skip
    payload = encode_request(0, 9, 5, fields)[4:]
    assert requests.inspect(payload, views=True)[1] is True
    assert requests.inspect(payload)[1] is False  # where no gateway serves views
    screened = DelayRules(read_only_views=True).screen(payload)
    assert [(r.topic, r.partition, r.error_code) for r in screened.refused] == [
        ("orders.full", 0, 42)  # INVALID_REQUEST
    ]
    assert screened.refused[0].message.endswith("produce to its topic instead")
    assert DelayRules().screen(payload).refused == ()


def _metadata_answer(version: int) -> Any:
    def partitions(leader: int) -> list[dict[str, Any]]:
        return [{"partition_index": p, "leader_id": leader, "leader_epoch": 3,
                 "replica_nodes": [leader], "isr_nodes": [leader]} for p in (0, 1)]  # fmt: skip

    body = {
        "brokers": [{"node_id": 1, "host": "gw.example", "port": 19094}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {"name": "orders", "partitions": partitions(1)},
            {"name": "orders.full", "partitions": partitions(1)},
        ],
    }
    cls = codec.response_class(METADATA, version)
    return codec.build(cls, body, any_version=True)


@pytest.mark.parametrize("version", [1, 7, 12])
def test_metadata_names_each_views_owner_as_its_leader(version: int) -> None:
    owners = {("orders.full", 0): (1_073_741_900, "gw2.example", 29092)}
    gateway3 = (1_073_741_999, "gw3.example", 39092)  # owns another view
    rewrite = views_in_metadata(
        lambda topic, partition: owners.get((topic, partition)),
        lambda: [*owners.values(), gateway3],
    )
    answer = rewrite(_metadata_answer(version), False)
    source, view = answer.topics
    assert [p.leader_id for p in source.partitions] == [1, 1]  # untouched
    owned, unowned = view.partitions
    assert (owned.error_code, owned.leader_id, list(owned.replica_nodes)) == (
        0, 1_073_741_900, [1_073_741_900],
    )  # fmt: skip
    assert (unowned.error_code, unowned.leader_id) == (5, -1)  # LEADER_NOT_AVAILABLE
    if version >= 7:
        assert owned.leader_epoch == -1  # no epoch checks asked of a gateway (KIP-320)
    brokers = {(b.node_id, b.host, b.port) for b in answer.brokers}
    assert brokers == {(1, "gw.example", 19094), (1_073_741_900, "gw2.example", 29092), gateway3}
    encode_answer(METADATA, version, 8, answer)  # kio's types kept
    listed = rewrite(_metadata_answer(version), True)
    assert [t.name for t in listed.topics] == ["orders"]  # named, not listed


class _Upstream:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.answers_completed = 0

    def write(self, pieces: list[Piece]) -> None:
        self.sent += [bytes(p) for p in pieces]  # type: ignore[arg-type]


class _Client:
    def __init__(self) -> None:
        self.upstream = _Upstream()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, pieces: list[bytes | memoryview]) -> None:
        self.written += [bytes(p) for p in pieces]

    def close(self) -> None:
        self.closed = True


class _Served:
    closing = False

    def __init__(self) -> None:
        self.release = asyncio.Event()

    def route(self, head: bytes | memoryview, size: int) -> Any:
        raise AssertionError("not asked here")

    async def answer(self, request: Decoded) -> bytes | None:
        await self.release.wait()
        return b"answer to " + cast(bytes, request[3])

    async def prepare(self, request: Decoded) -> None:
        await self.release.wait()


def _decoded(body: bytes) -> Decoded:
    """A stand-in for a decoded request: the served side here only echoes its body."""
    return (1, 12, 7, body)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_answer_of_the_gateway_keeps_its_turn_among_the_upstreams() -> None:
    client, served = _Client(), _Served()
    steps = LocalSteps(client, served)
    step = Step(Route.ANSWER, after=1, request=_decoded(b"fetch"))
    steps.relay([b"first", step, b"third"])
    await _settle()
    assert client.upstream.sent == [b"first"]  # the third waits for the gateway's answer
    served.release.set()
    await _settle()
    assert client.written == [] and client.upstream.sent == [b"first"]  # first's answer due
    client.upstream.answers_completed = 1
    steps.advance()
    assert client.written == [b"\x00\x00\x00\x0fanswer to fetch"]
    assert client.upstream.sent == [b"first", b"third"]


async def test_a_prepared_request_goes_upstream_after_its_preparation() -> None:
    client, served = _Client(), _Served()
    steps = LocalSteps(client, served)
    steps.relay([Step(Route.PREPARE, after=0, request=_decoded(b"meta"), payload=b"meta"), b"next"])
    await _settle()
    assert client.upstream.sent == []
    served.release.set()
    await _settle()
    assert client.upstream.sent == [b"\x00\x00\x00\x04meta", b"next"]
    steps.relay([b"later"])  # nothing held: straight through
    assert client.upstream.sent[-1] == b"later"


async def test_a_failed_answer_closes_the_connection() -> None:
    client = _Client()

    class Failing(_Served):
        async def answer(self, request: Decoded) -> bytes | None:
            raise ValueError("broken request")

    steps = LocalSteps(client, Failing())
    steps.relay([Step(Route.ANSWER, after=0, request=_decoded(b"x")), b"after"])
    await _settle()
    assert client.closed and client.upstream.sent == []


class _Ending(_Served):
    closing = True

    def __init__(self, answered: bytes | None) -> None:
        super().__init__()
        self.answered = answered

    async def answer(self, request: Decoded) -> bytes | None:
        return self.answered


async def test_an_answer_that_ends_the_connection_goes_out_first_and_nothing_after_it() -> None:
    """A failed login (client_login.py): its answer, or none in the raw-token form, then
    the connection closed; the requests behind it are never relayed."""
    for answered in (b"refused", None):
        client = _Client()
        steps = LocalSteps(client, _Ending(answered))
        steps.relay([Step(Route.ANSWER, after=0, request=_decoded(b"x")), b"after"])
        await _settle()
        expected = [] if answered is None else [b"\x00\x00\x00\x07refused"]
        assert client.written == expected and client.closed and client.upstream.sent == []
        assert not steps.waiting
