"""The metrics endpoint loaded at its first connection (kshim/server/metrics/on_demand.py):
bound at start, served once asked, with the requests answered before counted."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.client.wire import connect
from kshim.protocol.apis import API_VERSIONS_KEY
from kshim.server.listener import KafkaServer
from kshim.server.metrics.errors import MetricsUnavailable
from kshim.testing import free_port

TIMEOUT_S = 10.0


def settings(data_dir: Path, metrics: str) -> BrokerConfig:
    return BrokerConfig.load(
        [
            {
                "log.dirs": str(data_dir),
                "kshim.full.view.process": "false",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "kshim.metrics.listen": metrics,
            }
        ]
    )


def get(host: str, port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=TIMEOUT_S) as answer:
        return str(answer.read().decode())


def api_versions(bootstrap: str) -> None:
    with connect(bootstrap, TIMEOUT_S) as connection:
        connection.call(API_VERSIONS_KEY, 0)


async def test_loaded_at_the_first_scrape_with_earlier_requests_counted(tmp_path: Path) -> None:
    server = KafkaServer(Broker(settings(tmp_path, f"127.0.0.1:{free_port()}")))
    host, port = await server.start()
    try:
        metrics = server.metrics
        assert metrics is not None and metrics.address is not None
        assert metrics.served is None  # bound, nothing loaded
        await asyncio.to_thread(api_versions, f"{host}:{port}")
        page = await asyncio.to_thread(get, *metrics.address, "/metrics")
        assert metrics.served is not None
        assert 'kshim_requests_total{api="ApiVersions",error="none",version="0"} 1.0' in page
        assert (await asyncio.to_thread(get, *metrics.address, "/healthz")).startswith("ready")
    finally:
        await server.stop()


async def test_an_address_in_use_still_fails_the_start(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        server = KafkaServer(Broker(settings(tmp_path, address)))
        with pytest.raises(MetricsUnavailable):
            await server.start()


async def test_stopped_before_any_scrape_frees_the_port(tmp_path: Path) -> None:
    metrics_port = free_port()
    server = KafkaServer(Broker(settings(tmp_path, f"127.0.0.1:{metrics_port}")))
    await server.start()
    await server.stop()
    with socket.create_server(("127.0.0.1", metrics_port)):
        pass
