"""kshim's own failures while decoding or answering a request: that connection closes, the
failure is logged once with the API, version and peer, no task ends with an exception
nobody retrieves, and the broker goes on serving other connections."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kshim.api.routes import ROUTES, Route
from kshim.client.frames import decode_response, encode_request
from kshim.client.wire import ConnectionClosedError, WireConnection
from kshim.protocol.fetch_response import Part
from kshim.protocol.metadata_request import MetadataRequest
from tests.server.in_process import serving

METADATA_KEY, METADATA_VERSION = 3, 12
ANSWER_TIMEOUT_S = 10.0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    async with serving(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:0"}) as address:
        yield address


async def metadata_round_trip(address: tuple[str, int]) -> bytes:
    """One Metadata request on a new connection: the answer's frame, or b"" when the broker
    closes the connection instead. The blocking client runs in a thread, beside the
    server on this event loop."""

    def round_trip() -> bytes:
        fields = {"topics": None, "allow_auto_topic_creation": False}
        with WireConnection(*address, ANSWER_TIMEOUT_S) as connection:
            connection.send(encode_request(METADATA_KEY, METADATA_VERSION, 1, fields))
            try:
                return connection.read_frame()
            except ConnectionClosedError:
                return b""

    return await asyncio.to_thread(round_trip)


def failure_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno >= logging.ERROR]


async def test_a_failing_handler_closes_its_connection_and_is_logged_once(
    server: tuple[str, int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(request: MetadataRequest, context: object) -> list[Part]:
        raise RuntimeError("handler bug")

    healthy = ROUTES[METADATA_KEY]
    monkeypatch.setitem(ROUTES, METADATA_KEY, Route(MetadataRequest, broken, healthy.decode))
    with caplog.at_level(logging.INFO):
        assert await metadata_round_trip(server) == b""
        await asyncio.sleep(0.1)  # the connection's tasks finish
        gc.collect()  # an unretrieved task exception is reported when the task is collected
    [failure] = failure_lines(caplog)
    message = failure.getMessage()
    assert f"api {METADATA_KEY} v{METADATA_VERSION}" in message
    assert "127.0.0.1" in message
    assert failure.exc_info is not None and "handler bug" in str(failure.exc_info[1])
    assert not any("never retrieved" in record.getMessage() for record in caplog.records)

    monkeypatch.setitem(ROUTES, METADATA_KEY, healthy)
    frame = await metadata_round_trip(server)
    _, answer = decode_response(METADATA_KEY, METADATA_VERSION, frame)
    assert answer.topics == ()


async def test_a_failing_decoder_closes_its_connection_and_is_logged_once(
    server: tuple[str, int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*arguments: object) -> MetadataRequest:
        raise KeyError("a codec that could not be loaded")

    healthy = ROUTES[METADATA_KEY]
    monkeypatch.setitem(ROUTES, METADATA_KEY, Route(MetadataRequest, healthy.handle, broken))
    with caplog.at_level(logging.INFO):
        assert await metadata_round_trip(server) == b""
        await asyncio.sleep(0.1)
        gc.collect()
    [failure] = failure_lines(caplog)
    assert failure.exc_info is not None
    assert f"decoding api {METADATA_KEY} v{METADATA_VERSION} failed" in str(failure.exc_info[1])
    assert "127.0.0.1" in failure.getMessage()
    assert not any("never retrieved" in record.getMessage() for record in caplog.records)

    monkeypatch.undo()
    frame = await metadata_round_trip(server)
    _, answer = decode_response(METADATA_KEY, METADATA_VERSION, frame)
    assert answer.topics == ()
