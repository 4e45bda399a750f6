"""KafkaServer.stop drops open connections at once, on both event loops, as Kafka's
SocketServer closes its channels at shutdown: an idle TLS client that never answers the
server's close_notify (a pooled Java consumer, a client that is not reading) must not hold
the broker's stop for asyncio's SSL shutdown timeout (30 s)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path

import pytest
import trustme

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.cli.event_loop import run_on
from kshim.server.listener import KafkaServer

LOOPS = ["asyncio", "uvloop"]  # kshim.event.loop's choices
# A stop with nothing open takes milliseconds; the bug held it for 30 s.
STOP_BOUND_S = 5.0


def _tls_client(port: int, authority: trustme.CA) -> ssl.SSLSocket:
    """A blocking TLS connection, handshake done, that then reads nothing."""
    context = ssl.create_default_context()
    authority.configure_trust(context)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


async def _stop_with_idle_clients(tmp_path: Path, authority: trustme.CA) -> float:
    """Starts a server with a PLAINTEXT and an SSL listener, leaves one idle client on
    each, and returns how long stop() took (at most STOP_BOUND_S)."""
    pem = tmp_path / "broker.pem"
    authority.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    settings = {
        "log.dirs": str(tmp_path / "data"),
        "kshim.full.view.process": "false",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pem),
    }
    server = KafkaServer(Broker(BrokerConfig.load([settings])))
    await server.start()
    clients: list[socket.socket] = []
    try:
        clients.append(socket.create_connection(server.bound["PLAINTEXT"]))
        clients.append(await asyncio.to_thread(_tls_client, server.bound["SSL"][1], authority))
        await asyncio.sleep(0.2)  # both connections are being served
        started = time.monotonic()
        await asyncio.wait_for(server.stop(), STOP_BOUND_S)
        return time.monotonic() - started
    finally:
        for client in clients:
            client.close()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_stop_drops_an_idle_tls_client_at_once(loop_name: str, tmp_path: Path) -> None:
    elapsed = run_on(loop_name, _stop_with_idle_clients(tmp_path, trustme.CA()))
    assert elapsed < STOP_BOUND_S
