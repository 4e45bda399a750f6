"""A flood of requests or connections: the broker bounds what it holds and goes on serving.

Memory: the request bytes read and not yet handled stay within ``queued.max.request.bytes``
(server/request_budget.py; Kafka's request memory pool), every request is still answered,
small ones on other connections too, and no path (a connection dropped part way through a
request, a request that breaks the protocol) leaves bytes counted. Descriptors: at the
open-file limit new connections are closed at once, the open ones and the store go on
(server/descriptor_limit.py). Two tests run a real ``kshim serve``: one under a low
RLIMIT_NOFILE, one whose peak resident memory is read from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.client.frames import decode_response, encode_request
from kshim.client.wire import ConnectionClosedError, WireConnection, connect
from kshim.protocol.framing import FRAME_SIZE
from kshim.server.connection import MAX_IN_FLIGHT
from kshim.server.listener import KafkaServer
from kshim.testing import BrokerProcess, fetch_fields, free_port
from tests.bad_input_support import batch_of_size, create_topic, make_batch, produce_fields

MIB = 1 << 20
PRODUCE, FETCH, API_VERSIONS = (0, 9), (1, 11), (18, 3)
NONE = 0
WAIT_S = 10.0  # bound on anything a healthy broker does quickly
POLL_S = 5.0  # how long a long poll waits for records that never come
BATCH_BYTES = 1_000_000  # two of them make a request of about 2 MiB
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


# --- in process: the budget object itself is watched -------------------------------------


@contextlib.asynccontextmanager
async def broker_with_budget(
    data_dir: Path, budget_bytes: int, metrics: str = ""
) -> AsyncIterator[KafkaServer]:
    settings = {
        "log.dirs": str(data_dir),
        "kshim.full.view.process": "false",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "kshim.metrics.listen": metrics,
        "queued.max.request.bytes": str(budget_bytes),
    }
    server = KafkaServer(Broker(BrokerConfig.load([settings])))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def address(server: KafkaServer) -> tuple[str, int]:
    return next(iter(server.bound.values()))


async def open_stream(server: KafkaServer) -> Stream:
    return await asyncio.open_connection(*address(server))


async def read_answer(stream: Stream, api: tuple[int, int]) -> Any:
    """The next answer on ``stream``, decoded as ``api``'s response."""
    reader, _ = stream
    async with asyncio.timeout(WAIT_S):
        (size,) = FRAME_SIZE.unpack(await reader.readexactly(FRAME_SIZE.size))
        body = await reader.readexactly(size)
    return decode_response(*api, body)[1]


async def call(stream: Stream, api: tuple[int, int], request: bytes) -> Any:
    stream[1].write(request)
    await stream[1].drain()
    return await read_answer(stream, api)


def produce_request(topic: str, correlation_id: int) -> bytes:
    """A Produce (acks=all) of one batch of about BATCH_BYTES to each of two partitions."""
    batch, _ = batch_of_size(BATCH_BYTES)
    fields = produce_fields({(topic, 0): batch, (topic, 1): batch})
    return encode_request(*PRODUCE, correlation_id, fields)


def produce_errors(answer: Any) -> list[int]:
    return [part.error_code for topic in answer.responses for part in topic.partition_responses]


def scrape(metrics_address: tuple[str, int]) -> str:
    """The broker's /metrics page (from a thread: a scrape runs on the event loop)."""
    host, port = metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=WAIT_S) as answer:
        return str(answer.read().decode())


async def until(condition: Any, what: str) -> None:
    """Waits, within WAIT_S, for ``condition()``: the server notices a closed connection
    on its own loop, a few iterations after the client closed it."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def test_a_flood_of_large_requests_holds_no_more_than_the_budget(tmp_path: Path) -> None:
    budget_bytes, flood = 4 * MIB, 20
    async with broker_with_budget(tmp_path, budget_bytes) as server:
        host, port = address(server)
        await asyncio.to_thread(create_topic, f"{host}:{port}", "flood", 2, {})
        request = produce_request("flood", 1)
        budget = server.request_budget
        assert budget.capacity == budget_bytes
        streams = [await open_stream(server) for _ in range(flood)]
        small = [await open_stream(server) for _ in range(3)]
        flooding = asyncio.gather(*(call(stream, PRODUCE, request) for stream in streams))
        await until(lambda: budget.waiting > 0, "the flood never waited for room")
        # Small requests on other connections, sent while the flood waits: answered too
        # (outside the budget: they never wait behind large ones).
        versions = encode_request(*API_VERSIONS, 5, {})
        small_answers = await asyncio.gather(*(call(s, API_VERSIONS, versions) for s in small))
        answers = await flooding
        for stream in (*streams, *small):
            stream[1].close()
    assert [answer.error_code for answer in small_answers] == [NONE] * len(small)
    assert [produce_errors(answer) for answer in answers] == [[NONE, NONE]] * flood
    # Connections waited for room (the flood was held back), and never more was held.
    assert budget.waited > 0
    assert len(request) < budget.high_water <= budget_bytes
    assert (budget.in_use, budget.waiting) == (0, 0)


async def test_a_request_larger_than_the_budget_is_served_alone(tmp_path: Path) -> None:
    async with broker_with_budget(tmp_path, MIB) as server:
        host, port = address(server)
        await asyncio.to_thread(create_topic, f"{host}:{port}", "large", 2, {})
        streams = [await open_stream(server) for _ in range(3)]
        request = produce_request("large", 7)
        answers = await asyncio.gather(*(call(stream, PRODUCE, request) for stream in streams))
        for stream in streams:
            stream[1].close()
        budget = server.request_budget
    assert [produce_errors(answer) for answer in answers] == [[NONE, NONE]] * 3
    assert budget.high_water == len(request) - FRAME_SIZE.size  # one at a time
    assert (budget.in_use, budget.waiting) == (0, 0)


async def test_a_stalled_large_request_holds_back_no_small_ones(tmp_path: Path) -> None:
    """A client announces a frame as large as the whole budget and sends no more: small
    requests, read with their size prefix, are outside the budget and still answered."""
    async with broker_with_budget(tmp_path, MIB, f"127.0.0.1:{free_port()}") as server:
        budget = server.request_budget
        stalled = await open_stream(server)
        stalled[1].write(FRAME_SIZE.pack(MIB) + b"\0" * 1000)
        await until(lambda: budget.in_use == MIB, "the large frame was not reserved")
        other = await open_stream(server)
        answer = await call(other, API_VERSIONS, encode_request(*API_VERSIONS, 1, {}))
        waiting = await open_stream(server)
        waiting[1].write(FRAME_SIZE.pack(MIB) + b"\0" * 1000)
        await until(lambda: budget.waiting == 1, "the second large frame did not wait")
        assert server.metrics is not None and server.metrics.address is not None
        scraped = await asyncio.to_thread(scrape, server.metrics.address)
        assert "kshim_request_memory_used_bytes 1.048576e+06" in scraped
        assert "kshim_request_memory_waiting_connections 1.0" in scraped
        waiting[1].transport.abort()
        stalled[1].transport.abort()
        other[1].close()
        await until(lambda: budget.in_use == 0, "the stalled frame stayed counted")
    assert answer.error_code == NONE


async def test_no_bytes_stay_counted_after_drops_and_errors(tmp_path: Path) -> None:
    budget_bytes = 4 * MIB
    async with broker_with_budget(tmp_path, budget_bytes) as server:
        host, port = address(server)
        await asyncio.to_thread(create_topic, f"{host}:{port}", "drops", 2, {})
        budget = server.request_budget
        request = produce_request("drops", 3)
        # Half of each request, then the connection is reset: some are being received,
        # some wait for room; a garbage body of a valid size breaks the protocol.
        dropped = [await open_stream(server) for _ in range(6)]
        for _, writer in dropped:
            writer.write(request[: len(request) // 2])
        garbage = await open_stream(server)
        garbage[1].write(FRAME_SIZE.pack(MIB) + b"\xff" * MIB)
        await until(lambda: budget.waiting > 0, "no connection waited for room")
        for _, writer in dropped:
            writer.transport.abort()
        async with asyncio.timeout(WAIT_S):
            assert await garbage[0].read() == b""  # closed without an answer
        garbage[1].close()
        # Pipelined requests whose connection closes before they are read.
        pipelined = await open_stream(server)
        pipelined[1].write(request * 3)
        await pipelined[1].drain()
        pipelined[1].transport.abort()
        await until(lambda: budget.in_use == 0 and budget.waiting == 0, "bytes left counted")
        # The whole budget is there for the next requests.
        streams = [await open_stream(server) for _ in range(4)]
        answers = await asyncio.gather(*(call(stream, PRODUCE, request) for stream in streams))
        for stream in streams:
            stream[1].close()
    assert [produce_errors(answer) for answer in answers] == [[NONE, NONE]] * 4
    assert budget.high_water <= budget_bytes


async def test_a_connection_held_up_takes_at_most_one_large_request_of_the_budget(
    tmp_path: Path,
) -> None:
    """A client pipelines long polls until the broker's reader for it waits (the writer
    awaits the first poll, MAX_IN_FLIGHT wait in line, one more is being put in line),
    then large produce requests: one is read ahead, the next waits unread, so another
    client's produce still finds room rather than waiting for the polls to end."""
    async with broker_with_budget(tmp_path, 4 * MIB) as server:
        host, port = address(server)
        bootstrap = f"{host}:{port}"
        await asyncio.to_thread(create_topic, bootstrap, "quiet", 1, {})
        await asyncio.to_thread(create_topic, bootstrap, "busy", 2, {})
        budget = server.request_budget
        request = produce_request("busy", 9)
        # KafkaServer.stop waits for these polls to end: short, but well past the answer.
        fetch = fetch_fields("quiet", 0, 0, int(POLL_S * 1000))
        polls = [encode_request(*FETCH, n, fetch) for n in range(MAX_IN_FLIGHT + 2)]
        held_up = await open_stream(server)
        held_up[1].write(b"".join(polls) + request * 3)
        read_ahead = len(request) - FRAME_SIZE.size  # the polls are small: not counted
        await until(lambda: budget.in_use >= read_ahead, "no produce was read ahead")
        other = await open_stream(server)
        async with asyncio.timeout(POLL_S / 2):
            answer = await call(other, PRODUCE, request)
        held_up[1].transport.abort()
        other[1].close()
    assert produce_errors(answer) == [NONE, NONE]


# --- a real ``kshim serve``: descriptors and resident memory ------------------------------


class LimitedBroker(BrokerProcess):
    """``kshim serve`` under an open-file limit of ``limit`` (soft and hard, so that the
    broker cannot raise it), set in the child before it runs the broker."""

    def __init__(self, data_dir: Path, settings: list[str], limit: int) -> None:
        super().__init__(data_dir, settings)
        self.limit = limit

    def command(self) -> list[str]:
        limit = f"resource.setrlimit(resource.RLIMIT_NOFILE, ({self.limit}, {self.limit}))"
        run = f"import os, resource, sys; {limit}; os.execv(sys.argv[1], sys.argv[1:])"
        return [sys.executable, "-c", run, *super().command()]


@contextlib.contextmanager
def running(broker: BrokerProcess) -> Iterator[BrokerProcess]:
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def produce_on(connection: WireConnection, topic: str, values: list[bytes]) -> int:
    """Produces one batch to partition 0 of ``topic``; returns its base offset."""
    answer = connection.call(*PRODUCE, produce_fields({(topic, 0): make_batch(values)}))
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == NONE
    return int(part.base_offset)


def fetch_values(connection: WireConnection, topic: str) -> int:
    """Fetches partition 0 of ``topic`` from offset 0; returns the bytes of records read."""
    answer = connection.call(*FETCH, fetch_fields(topic, 0, 0, 0))
    part = answer.responses[0].partitions[0]
    assert part.error_code == NONE
    return len(part.records or b"")


def create_on(connection: WireConnection, topic: str) -> None:
    spec = {"name": topic, "num_partitions": 1, "replication_factor": 1, "configs": []}
    answer = connection.call(19, 7, {"topics": [spec], "timeout": 5000})
    assert [t.error_code for t in answer.topics] == [NONE]


def served(bootstrap: str) -> WireConnection | None:
    """A new connection that the broker answers, or None when it closes it at once."""
    connection = connect(bootstrap, WAIT_S)
    try:
        connection.call(*API_VERSIONS, {})
    except (ConnectionClosedError, ConnectionResetError, BrokenPipeError):
        connection.close()
        return None
    return connection


CAPPED = re.compile(r"WARNING .*: accepting at most (\d+) connections, not max\.connections=")


def test_at_the_open_file_limit_new_connections_are_closed_and_the_rest_go_on(
    tmp_path: Path,
) -> None:
    # Small memtables: the new topic's records are spilled to segment files and read back.
    settings = [
        "kshim.max.open.files=8",
        "kshim.metrics.listen=",
        "kshim.memtable.bytes=4096",
        "kshim.memtable.total.bytes=65536",
        "kshim.wal.checkpoint.interval.ms=20",
    ]
    with running(LimitedBroker(tmp_path / "data", settings, limit=256)) as broker:
        create_topic(broker.bootstrap, "kept", 1, {})
        capped = CAPPED.findall(broker.log_text())
        assert len(capped) == 1, broker.log_text()
        cap = int(capped[0])
        with contextlib.ExitStack() as opened_ones:
            opened: list[WireConnection] = []
            while (connection := served(broker.bootstrap)) is not None:
                opened.append(opened_ones.enter_context(connection))
                assert len(opened) <= cap
            # Some connections the broker had not yet seen closed may have counted.
            assert len(opened) >= cap - 3
            first, last = opened[0], opened[-1]
            assert produce_on(first, "kept", [b"at the limit"]) == 0
            assert fetch_values(last, "kept") > 0
            create_on(last, "fresh")
            for index in range(40):
                produce_on(first, "fresh", [bytes([index]) * 4096])
            assert fetch_values(last, "fresh") > 0
            segments = (tmp_path / "data" / "logs" / "fresh-0").glob("*.log")
            assert sum(segment.stat().st_size for segment in segments) > 0
            for connection in opened[1:]:
                connection.close()
            deadline = time.monotonic() + WAIT_S
            while (again := served(broker.bootstrap)) is None:
                assert time.monotonic() < deadline, "no connection accepted after others closed"
            again.close()
            assert produce_on(first, "kept", [b"after"]) == 1
        assert broker.is_running()
    log = broker.log_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


def peak_resident_bytes(broker: BrokerProcess) -> int:
    """The broker process's peak resident set size so far (VmHWM, Linux /proc)."""
    assert broker.process is not None
    status = Path(f"/proc/{broker.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


async def flood(bootstrap: str, request: bytes, connections: int) -> list[Any]:
    """``request`` on ``connections`` new connections at once; their answers."""
    host, port = bootstrap.rsplit(":", 1)
    streams = [await asyncio.open_connection(host, int(port)) for _ in range(connections)]
    try:
        return await asyncio.gather(*(call(stream, PRODUCE, request) for stream in streams))
    finally:
        for _, writer in streams:
            writer.close()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_resident_memory_under_a_flood_stays_within_the_budget(tmp_path: Path) -> None:
    budget_bytes, connections, batch_bytes = 8 * MIB, 32, 4 * MIB
    settings = [
        f"queued.max.request.bytes={budget_bytes}",
        "kshim.full.view.process=false",  # the process tree is the broker alone
        "kshim.metrics.listen=",
    ]
    # Records for a topic that cannot exist ('!'): read, decoded and answered, never stored.
    batch = make_batch([b"x" * batch_bytes])
    request = encode_request(*PRODUCE, 1, produce_fields({("flood!", 0): batch}))
    with running(BrokerProcess(tmp_path / "data", settings)) as broker:
        asyncio.run(flood(broker.bootstrap, request, 1))  # codecs loaded, buffers warm
        before = peak_resident_bytes(broker)
        answers = asyncio.run(flood(broker.bootstrap, request, connections))
        grown = peak_resident_bytes(broker) - before
        assert broker.is_running()
    assert len(answers) == connections
    assert all(errors and NONE not in errors for errors in map(produce_errors, answers))
    # A frame over 1 MiB is read in parts and joined (one copy), and the budget may be
    # passed by one request: about 3 budgets, against the 128 MiB the flood sends.
    assert grown < 3 * budget_bytes + 16 * MIB, f"peak resident memory grew {grown >> 20} MiB"
    log = broker.log_text()
    assert "MemoryError" not in log and "Traceback" not in log, log[-3000:]
