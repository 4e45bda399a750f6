"""A KafkaServer on this test's event loop, its data in a temporary directory: for tests that
reach into the server while it runs (patched handlers, log capture)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.server.listener import KafkaServer


@contextlib.asynccontextmanager
async def serving(data_dir: Path, settings: dict[str, str]) -> AsyncIterator[tuple[str, int]]:
    """The server's first listener's (host, port) while the block runs; stopped after it.
    ``settings`` come on top of the data directory and no full-view process."""
    config = {"log.dirs": str(data_dir), "kshim.full.view.process": "false", **settings}
    kafka_server = KafkaServer(Broker(BrokerConfig.load([config])))
    address = await kafka_server.start()
    try:
        yield address
    finally:
        await kafka_server.stop()
