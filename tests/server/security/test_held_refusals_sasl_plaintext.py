"""On a SASL_PLAINTEXT listener (no TLS handshake to refuse before), an address with no
failed-login token left has its new connections held unread until a token is back, then
closed; a request it sends meanwhile is never answered. In-process broker, bounded waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kshim.client.frames import encode_request
from kshim.client.sasl import AuthenticationFailed
from kshim.client.security import ClientSecurity
from kshim.client.wire import WireConnection
from tests.secured_broker import ALICE_PASSWORD, PLAIN_JAAS
from tests.server.in_process import serving

pytestmark = pytest.mark.timeout(60)
API_VERSIONS = encode_request(18, 0, 1, {})
TIMEOUT_S = 10.0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "kshim.failed.authentication.burst": "1",
        "kshim.failed.authentication.rate": "1",
        "kshim.metrics.listen": "",
    }
    async with serving(tmp_path, settings) as address:
        yield address


def _login(address: tuple[str, int], password: str) -> WireConnection:
    security = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", password)
    return WireConnection(*address, TIMEOUT_S, security=security)


def _held_then_closed(address: tuple[str, int]) -> tuple[float, bytes]:
    """A connection after the token is spent: seconds until the broker closed it, and
    what it answered to the ApiVersions sent at once."""
    with WireConnection(*address, TIMEOUT_S) as connection:
        started = time.monotonic()
        connection.send(API_VERSIONS)
        answered = connection.wait_closed(TIMEOUT_S)
        return time.monotonic() - started, answered


async def test_a_connection_from_an_address_without_tokens_is_held_then_closed(
    server: tuple[str, int],
) -> None:
    def wrong_then_held() -> tuple[float, bytes]:
        with pytest.raises(AuthenticationFailed):
            _login(server, "wrong").close()
        return _held_then_closed(server)

    held_s, answered = await asyncio.to_thread(wrong_then_held)
    assert answered == b""
    assert 0.25 <= held_s <= 1.5

    def right_once_a_token_is_back() -> None:
        time.sleep(1.1)
        with _login(server, ALICE_PASSWORD) as connection:
            connection.send(API_VERSIONS)
            assert connection.read_frame()

    await asyncio.to_thread(right_once_a_token_is_back)
