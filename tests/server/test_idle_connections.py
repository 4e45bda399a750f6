"""An idle connection costs the broker little: no task, queue or future, only its transport,
its stream and its Connection (connection.py), on both event loops. benchmarks/accumulation.py
opens 500 such connections next to Apache Kafka, whose JVM heap is already allocated.

Each idle connection here has had one ApiVersions answer, as a client's first request,
and is then quiet. It must still be served when it speaks again, and closed when its peer
closes.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import tracemalloc
from collections.abc import Coroutine
from pathlib import Path
from typing import TypeVar

import pytest

import kshim
from kshim.cli.event_loop import run_on
from tests.server.in_process import serving

LOOPS = ["asyncio", "uvloop"]  # kshim.event.loop's choices
CONNECTIONS = 200
# Python heap made while kshim's server code runs, per idle connection: its stream,
# Connection and session (the transport, made by the loop, is not counted). About 1.2 KB;
# it was 11 KB when each held a reader and a writer task, an asyncio.Queue and two deques.
HEAP_BOUND_PER_CONNECTION = 3_000
TRACED_FRAMES = 32  # deep enough to reach the server's frames from any allocation
# Not the whole package: the test's client runs under kshim.cli's run_on too.
SERVER_FILES = str(Path(kshim.__file__).parent / "server" / "*")
API_VERSIONS_KEY = 18
# ApiVersions v0 (https://kafka.apache.org/protocol#The_Messages_ApiVersions): api key,
# version, correlation id, then the client id as an int16-prefixed string.
REQUEST_BODY = struct.pack(">hhih", API_VERSIONS_KEY, 0, 7, 4) + b"idle"
REQUEST = struct.pack(">i", len(REQUEST_BODY)) + REQUEST_BODY
IO_TIMEOUT_S = 10.0
Result = TypeVar("Result")


async def _receive(sock: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    received = b""
    while len(received) < size:
        chunk = await loop.sock_recv(sock, size - len(received))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        received += chunk
    return received


async def _ask_versions(sock: socket.socket) -> int:
    """Sends ApiVersions v0 and returns its answer's error code."""
    await asyncio.get_running_loop().sock_sendall(sock, REQUEST)
    (size,) = struct.unpack(">i", await _receive(sock, 4))
    answer = await _receive(sock, size)
    correlation_id, error_code = struct.unpack_from(">ih", answer)
    assert correlation_id == 7
    return int(error_code)


async def _open_idle(address: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` connections, each answered once, then quiet."""
    opened: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket()
        opened.append(sock)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, address)
        assert await _ask_versions(sock) == 0
    return opened


async def _settled() -> None:
    """Lets the broker's callbacks scheduled by the last answers run."""
    for _ in range(10):
        await asyncio.sleep(0)


def _server_heap(snapshot: tracemalloc.Snapshot) -> int:
    kept = snapshot.filter_traces([tracemalloc.Filter(True, SERVER_FILES, all_frames=True)])
    return sum(statistic.size for statistic in kept.statistics("filename"))


async def _heap_per_idle_connection(tmp_path: Path) -> float:
    async with serving(tmp_path / "data", {"kshim.metrics.listen": ""}) as address:
        for sock in await _open_idle(address, 1):  # first-use costs (codecs) are not counted
            sock.close()
        await _settled()
        tracemalloc.start(TRACED_FRAMES)
        try:
            before = _server_heap(tracemalloc.take_snapshot())
            idle = await _open_idle(address, CONNECTIONS)
            await _settled()
            after = _server_heap(tracemalloc.take_snapshot())
        finally:
            tracemalloc.stop()
        try:
            return (after - before) / CONNECTIONS
        finally:
            for sock in idle:
                sock.close()


async def _tasks_while_idle(tmp_path: Path) -> tuple[int, int]:
    """The tasks running with no client connected, and with CONNECTIONS idle ones."""
    async with serving(tmp_path / "data", {"kshim.metrics.listen": ""}) as address:
        await _settled()
        without = len(asyncio.all_tasks())
        idle = await _open_idle(address, CONNECTIONS)
        await _settled()
        with_idle = len(asyncio.all_tasks())
        for sock in idle:
            sock.close()
        return without, with_idle


async def _served_again_then_closed(tmp_path: Path) -> None:
    """Idle connections are answered when they speak again, and closed by the broker
    when their peer closes (a half-close: the peer still reads)."""
    async with serving(tmp_path / "data", {"kshim.metrics.listen": ""}) as address:
        idle = await _open_idle(address, 20)
        try:
            async with asyncio.timeout(IO_TIMEOUT_S):
                await _settled()
                for sock in idle:
                    assert await _ask_versions(sock) == 0
                await _settled()
                for sock in idle:
                    sock.shutdown(socket.SHUT_WR)
                    assert await asyncio.get_running_loop().sock_recv(sock, 1) == b""
        finally:
            for sock in idle:
                sock.close()


def _run(loop_name: str, scenario: Coroutine[object, None, Result]) -> Result:
    async def bounded() -> Result:
        async with asyncio.timeout(60):
            return await scenario

    return run_on(loop_name, bounded())


@pytest.mark.parametrize("loop_name", LOOPS)
def test_an_idle_connection_holds_little_heap(loop_name: str, tmp_path: Path) -> None:
    per_connection = _run(loop_name, _heap_per_idle_connection(tmp_path))
    assert 0 < per_connection < HEAP_BOUND_PER_CONNECTION


@pytest.mark.parametrize("loop_name", LOOPS)
def test_an_idle_connection_holds_no_task(loop_name: str, tmp_path: Path) -> None:
    without, with_idle = _run(loop_name, _tasks_while_idle(tmp_path))
    # Not one a connection (the broker's own periodic jobs may start one meanwhile).
    assert with_idle - without < CONNECTIONS // 20


@pytest.mark.parametrize("loop_name", LOOPS)
def test_an_idle_connection_is_served_again_and_closed_with_its_peer(
    loop_name: str, tmp_path: Path
) -> None:
    _run(loop_name, _served_again_then_closed(tmp_path))
